//! The strings of a block's used lines, written by the thread that
//! classifies the block and read by the thread that applies it.
//!
//! A used line's strings (request id, model, pod, endpoint ids, plugin
//! names, the id lists of endpoint dumps) are appended to one [`Arena`] per
//! block instead of being allocated one by one: the classifying thread makes
//! no allocation per string, and the applying thread reads them from one
//! buffer, in order, instead of from the block's lines (written by the other
//! core) and from allocations that it would then free across threads. The
//! applying thread copies an event's strings to the arena of its request
//! (which buffers its events until it closes), and makes owned strings only
//! of those a decision keeps. A block's arena is recycled with the block: the
//! steady state allocates nothing.
//!
//! A span is an offset: read against another arena, or against its own
//! after it was cleared, it gives other bytes (or none). Debug builds
//! (tests, fuzzing) tag every span with the arena and the filling of it
//! that made it, and reading one elsewhere panics; release builds carry no
//! tag and read such a span as whatever is at its offsets, within bounds.

use std::borrow::Cow;

/// Which arena, and which filling of it (a cleared arena is a new one),
/// made a span: debug builds only. `0` is no arena (a default, empty span).
#[cfg(debug_assertions)]
type Owner = u64;

/// A fresh [`Owner`].
#[cfg(debug_assertions)]
fn next_owner() -> Owner {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A string in an [`Arena`]: `text[start..end]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    start: usize,
    end: usize,
    #[cfg(debug_assertions)]
    owner: Owner,
}

/// A list of strings in an [`Arena`]: `spans[start..end]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Spans {
    start: usize,
    end: usize,
    #[cfg(debug_assertions)]
    owner: Owner,
}

/// Strings and lists of strings, appended.
pub(crate) struct Arena {
    text: Vec<u8>,
    spans: Vec<Span>,
    #[cfg(debug_assertions)]
    owner: Owner,
}

impl Default for Arena {
    fn default() -> Arena {
        Arena::with_capacity(0, 0)
    }
}

impl Arena {
    /// Panics unless a span or list (made by `owner`, empty or not) was
    /// made by this arena since it was last cleared; an empty default one
    /// reads as empty anywhere. Debug builds only.
    #[cfg(debug_assertions)]
    #[inline]
    fn check(&self, owner: Owner, empty: bool) {
        assert!(
            owner == self.owner || (owner == 0 && empty),
            "a span read against an arena that did not make it \
             (another arena, or this one before it was cleared)"
        );
    }

    /// Bytes the arena holds on the heap (its capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.spans.capacity() * std::mem::size_of::<Span>()
    }

    /// An arena with room for `bytes` of text and `items` list items.
    pub(crate) fn with_capacity(bytes: usize, items: usize) -> Arena {
        Arena {
            text: Vec::with_capacity(bytes),
            spans: Vec::with_capacity(items),
            #[cfg(debug_assertions)]
            owner: next_owner(),
        }
    }

    /// Empties the arena, keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.text.clear();
        self.spans.clear();
        #[cfg(debug_assertions)]
        {
            self.owner = next_owner();
        }
    }

    /// Appends bytes (a string as written: UTF-8 unless the line was not).
    #[inline]
    pub(crate) fn push(&mut self, b: &[u8]) -> Span {
        let start = self.text.len();
        self.text.extend_from_slice(b);
        Span {
            start,
            end: self.text.len(),
            #[cfg(debug_assertions)]
            owner: self.owner,
        }
    }

    /// Appends `ns/name`.
    #[inline]
    pub(crate) fn push_join(&mut self, ns: &str, name: &str) -> Span {
        self.push_join_bytes(ns.as_bytes(), name.as_bytes())
    }

    /// Appends `ns/name`, bytes as written.
    #[inline]
    pub(crate) fn push_join_bytes(&mut self, ns: &[u8], name: &[u8]) -> Span {
        let start = self.text.len();
        self.text.reserve(ns.len() + 1 + name.len());
        self.text.extend_from_slice(ns);
        self.text.push(b'/');
        self.text.extend_from_slice(name);
        Span {
            start,
            end: self.text.len(),
            #[cfg(debug_assertions)]
            owner: self.owner,
        }
    }

    /// Where the next list starts: push its items with
    /// [`Arena::push_item`], then close it with [`Arena::list_from`].
    #[inline]
    pub(crate) fn list_start(&self) -> usize {
        self.spans.len()
    }

    #[inline]
    pub(crate) fn push_item(&mut self, s: Span) {
        self.spans.push(s);
    }

    /// The items pushed since `start` (from [`Arena::list_start`]).
    #[inline]
    pub(crate) fn list_from(&self, start: usize) -> Spans {
        Spans {
            start,
            end: self.spans.len(),
            #[cfg(debug_assertions)]
            owner: self.owner,
        }
    }

    /// Whether a list is empty.
    #[inline]
    pub(crate) fn is_empty_list(l: Spans) -> bool {
        l.start >= l.end
    }

    /// The bytes of a string (in release builds, whatever is at its offsets
    /// for a span of another arena, never out of bounds; a panic in debug builds).
    #[inline]
    pub(crate) fn bytes(&self, s: Span) -> &[u8] {
        #[cfg(debug_assertions)]
        self.check(s.owner, s.start >= s.end);
        self.text.get(s.start..s.end).unwrap_or_default()
    }

    /// A string, lossily if its bytes are not UTF-8.
    #[inline]
    pub(crate) fn str(&self, s: Span) -> Cow<'_, str> {
        crate::json::lossy(self.bytes(s))
    }

    /// A string, owned.
    #[inline]
    pub(crate) fn string(&self, s: Span) -> String {
        self.str(s).into_owned()
    }

    /// The items of a list (as [`Arena::bytes`] for a list of another
    /// arena).
    #[inline]
    pub(crate) fn list(&self, l: Spans) -> &[Span] {
        #[cfg(debug_assertions)]
        self.check(l.owner, l.start >= l.end);
        self.spans.get(l.start..l.end).unwrap_or_default()
    }

    /// A list, owned.
    #[cfg(test)]
    pub(crate) fn strings(&self, l: Spans) -> Vec<String> {
        self.list(l).iter().map(|&s| self.string(s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_lists_read_back() {
        let mut a = Arena::default();
        let x = a.push(b"abc");
        let start = a.list_start();
        let i = a.push_join("ns", "pod-1");
        a.push_item(i);
        let j = a.push(b"10.0.0.1:8000");
        a.push_item(j);
        let l = a.list_from(start);
        let bad = a.push(b"\xffx");
        assert_eq!(a.string(x), "abc");
        assert_eq!(a.strings(l), ["ns/pod-1", "10.0.0.1:8000"]);
        assert_eq!(a.bytes(bad), b"\xffx");
        assert_eq!(a.string(bad), "\u{fffd}x");
        assert!(!Arena::is_empty_list(l));
        assert!(Arena::is_empty_list(a.list_from(a.list_start())));
        assert!(a.list(Spans::default()).is_empty());
        assert_eq!(a.bytes(Span::default()), b"");
    }

    /// A span read against an arena that did not make it: a panic in debug
    /// builds; in release builds, whatever is at its offsets, in bounds.
    #[test]
    fn spans_of_another_arena_are_caught() {
        let mut a = Arena::default();
        let x = a.push(b"abc");
        let start = a.list_start();
        a.push_item(x);
        let l = a.list_from(start);
        let mut b = Arena::default();
        b.push(b"xyz");
        a.clear();
        let read =
            |f: &dyn Fn() -> usize| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok();
        for got in [
            read(&|| a.bytes(x).len()),
            read(&|| a.list(l).len()),
            read(&|| b.bytes(x).len()),
            read(&|| b.list(l).len()),
        ] {
            if cfg!(debug_assertions) {
                assert_eq!(got, None);
            } else {
                assert!(got.is_some());
            }
        }
        assert_eq!(read(&|| a.bytes(x).len()).unwrap_or(0), 0);
        let q = b.push(b"q");
        assert_eq!(b.bytes(q), b"q");
    }
}
