//! Shared strings: the names a run repeats on every decision (endpoint ids,
//! scorer and filter plugins, profiles, deployments, the input's name) are
//! held once and shared by reference count.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

/// An immutable string shared by reference count: cloning it copies a
/// pointer, never the text. Compares, hashes, orders, prints and
/// serialises as the `str` it holds.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Name(Arc<str>);

// Two words, as a `&str`: a `String` is three.
const _: () = assert!(size_of::<Name>() == 16);
const _: () = assert!(size_of::<Option<Name>>() == 16);

impl Name {
    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `self` and `other` share one allocation (then they are
    /// equal without comparing the text).
    #[inline]
    pub fn ptr_eq(&self, other: &Name) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for Name {
    /// The empty string (one shared allocation for the whole process).
    fn default() -> Name {
        static EMPTY: OnceLock<Name> = OnceLock::new();
        EMPTY.get_or_init(|| Name(Arc::from(""))).clone()
    }
}

impl Hash for Name {
    // As the `str` (so a set of names is searched by `&str`).
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Deref for Name {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name(Arc::from(s))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name(Arc::from(s))
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Name {
        Name(Arc::from(s.as_str()))
    }
}

impl From<std::borrow::Cow<'_, str>> for Name {
    fn from(s: std::borrow::Cow<'_, str>) -> Name {
        Name(Arc::from(s))
    }
}

impl From<Name> for String {
    fn from(n: Name) -> String {
        n.as_str().to_owned()
    }
}

impl From<&Name> for Name {
    fn from(n: &Name) -> Name {
        n.clone()
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, o: &str) -> bool {
        self.as_str() == o
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, o: &&str) -> bool {
        self.as_str() == *o
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, o: &String) -> bool {
        self.as_str() == o.as_str()
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, o: &Name) -> bool {
        self == o.as_str()
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, o: &Name) -> bool {
        *self == o.as_str()
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, o: &Name) -> bool {
        self.as_str() == o.as_str()
    }
}

impl serde::Serialize for Name {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Name {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        String::deserialize(d).map(Name::from)
    }
}

/// Entries an [`Interner`] starts pruning at.
const INTERNER_PRUNE_AT: usize = 4096;

/// One [`Name`] per distinct text: a string seen again is shared, not
/// allocated again. Bounded by what is in use: when it holds more than
/// its limit, the names no one else holds any more are dropped, and the
/// limit becomes twice what is left (at least its start), so a long run
/// whose endpoints come and go keeps only the live ones.
#[derive(Debug)]
pub struct Interner {
    set: rustc_hash::FxHashSet<Name>,
    prune_at: usize,
}

impl Default for Interner {
    fn default() -> Interner {
        Interner {
            set: rustc_hash::FxHashSet::default(),
            prune_at: INTERNER_PRUNE_AT,
        }
    }
}

impl Interner {
    /// The name of `s`.
    #[inline]
    pub fn intern(&mut self, s: &str) -> Name {
        if let Some(n) = self.set.get(s) {
            return n.clone();
        }
        self.insert(Name::from(s))
    }

    /// The name of the bytes `b` (lossily if not UTF-8).
    #[inline]
    pub fn intern_bytes(&mut self, b: &[u8]) -> Name {
        self.intern(&crate::json::lossy(b))
    }

    #[cold]
    fn insert(&mut self, n: Name) -> Name {
        if self.set.len() >= self.prune_at {
            self.set.retain(|n| Arc::strong_count(&n.0) > 1);
            self.prune_at = (2 * self.set.len()).max(INTERNER_PRUNE_AT);
        }
        self.set.insert(n.clone());
        n
    }

    /// Distinct names held.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether no name is held.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_seen_again_is_shared() {
        let mut i = Interner::default();
        let a = i.intern("ns/pod-a");
        let b = i.intern("ns/pod-a");
        let c = i.intern("ns/pod-b");
        assert!(a.ptr_eq(&b) && !a.ptr_eq(&c));
        assert_eq!((a.as_str(), c.as_str()), ("ns/pod-a", "ns/pod-b"));
        assert_eq!(i.len(), 2);
        // Lossy bytes name the same text.
        assert!(i.intern_bytes(b"ns/pod-a").ptr_eq(&a));
    }

    #[test]
    fn names_no_one_holds_are_dropped_past_the_limit() {
        let mut i = Interner::default();
        let kept: Vec<Name> = (0..10).map(|k| i.intern(&format!("kept-{k}"))).collect();
        for k in 0..100_000 {
            i.intern(&format!("gone-{k}"));
            assert!(i.len() <= 2 * INTERNER_PRUNE_AT, "{} names", i.len());
        }
        // The names still held are still shared.
        for (k, n) in kept.iter().enumerate() {
            assert!(i.intern(&format!("kept-{k}")).ptr_eq(n));
        }
    }

    #[test]
    fn a_name_is_its_text_to_compare_print_and_serialise() {
        let n = Name::from("a\"b");
        assert_eq!(n, "a\"b");
        assert_eq!("a\"b", n);
        assert_eq!(n, String::from("a\"b"));
        assert_eq!(format!("{n} {n:?}"), "a\"b \"a\\\"b\"");
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"a\\\"b\"");
        let back: Name = serde_json::from_str("\"a\\\"b\"").unwrap();
        assert_eq!(back, n);
        assert_eq!(Name::default(), "");
        assert!(Name::default().ptr_eq(&Name::default()));
    }
}
