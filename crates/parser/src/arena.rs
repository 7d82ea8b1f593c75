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

use std::borrow::Cow;

/// A string in an [`Arena`]: `text[start..end]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    start: usize,
    end: usize,
}

/// A list of strings in an [`Arena`]: `spans[start..end]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Spans {
    start: usize,
    end: usize,
}

/// Strings and lists of strings, appended.
#[derive(Default)]
pub(crate) struct Arena {
    text: Vec<u8>,
    spans: Vec<Span>,
}

impl Arena {
    /// Bytes the arena holds on the heap (its capacity).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.spans.capacity() * std::mem::size_of::<Span>()
    }

    /// An arena with room for `bytes` of text and `items` list items.
    pub(crate) fn with_capacity(bytes: usize, items: usize) -> Arena {
        Arena {
            text: Vec::with_capacity(bytes),
            spans: Vec::with_capacity(items),
        }
    }

    /// Empties the arena, keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.text.clear();
        self.spans.clear();
    }

    /// Appends bytes (a string as written: UTF-8 unless the line was not).
    #[inline]
    pub(crate) fn push(&mut self, b: &[u8]) -> Span {
        let start = self.text.len();
        self.text.extend_from_slice(b);
        Span {
            start,
            end: self.text.len(),
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
        }
    }

    /// Whether a list is empty.
    #[inline]
    pub(crate) fn is_empty_list(l: Spans) -> bool {
        l.start >= l.end
    }

    /// The bytes of a string (empty for a span of another arena).
    #[inline]
    pub(crate) fn bytes(&self, s: Span) -> &[u8] {
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

    /// The items of a list (empty for a list of another arena).
    #[inline]
    pub(crate) fn list(&self, l: Spans) -> &[Span] {
        self.spans.get(l.start..l.end).unwrap_or_default()
    }

    /// A list, owned.
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
        a.clear();
        // Spans of the old contents read as empty, never out of bounds.
        assert_eq!(a.bytes(x), b"");
        assert!(a.list(l).is_empty());
    }
}
