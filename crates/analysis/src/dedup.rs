//! Decisions seen twice are counted once.
//!
//! The same log captured twice under two file names, or overlapping
//! `kubectl logs` captures concatenated, give the same decisions twice. A
//! decision is a duplicate of one seen before when both have the same
//! deployment, request id, scheduling profile, filter instance and time
//! (`ts`, to the bit), and both come from logs or decision records, or both
//! from trace spans (a traced decision is the span of a log decision, not a
//! copy of it: the join pairs them). A decision without a request id or a
//! finite time is never taken for a duplicate.
//!
//! Memory: a fingerprint (a 64-bit hash of the key) per decision, kept by
//! second of log time. At most [`MAX_FINGERPRINTS`] are kept, a second
//! counting as [`SECOND_COST`] fingerprints besides its own (a set per
//! second costs about that much): at most about 20 MiB, however sparse the
//! decisions. Past that the oldest second (by log time) is forgotten, and a later
//! decision at or before a forgotten second cannot be checked: it is kept,
//! and counted in [`Duplicates::unchecked`]. Decisions arrive roughly in
//! time order, so this happens only when a copy starts more than the
//! remembered span (about [`MAX_FINGERPRINTS`] decisions) before the newest
//! decision seen: the first part of the second copy of a log over about a
//! million decisions, or captures that overlap by more than that.
//!
//! A 64-bit fingerprint takes two different decisions of the same second
//! for one with a probability of about `n² / 2⁶⁵` for `n` decisions in that
//! second: below 10⁻¹³ at 1,000 decisions a second.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use rustc_hash::FxHashSet;
use serde::Serialize;

/// Fingerprints kept at most (the decisions of the newest seconds).
pub const MAX_FINGERPRINTS: usize = 1 << 20;

/// What a second of log time remembered counts in [`MAX_FINGERPRINTS`]
/// besides its fingerprints: its set and map entry (about 130 bytes) are
/// worth about eight fingerprints (16 to 20 bytes each in a set).
pub const SECOND_COST: usize = 8;

/// What the duplicate check found, as reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Duplicates {
    /// Decisions seen before (the same deployment, request id, profile,
    /// filter instance and time): dropped, so each counts once.
    pub decisions: u64,
    /// Decisions at or before a second whose fingerprints were forgotten
    /// (past [`MAX_FINGERPRINTS`]): kept without the check.
    pub unchecked: u64,
}

/// The key of one decision, as the check compares it.
#[derive(Clone, Copy, Debug)]
pub struct DecisionKey<'a> {
    /// Deployment name.
    pub deployment: &'a str,
    /// `x-request-id`.
    pub request_id: Option<&'a str>,
    /// Scheduling profile.
    pub profile: Option<&'a str>,
    /// Filter instance.
    pub filter: Option<&'a str>,
    /// Epoch seconds.
    pub ts: Option<f64>,
    /// Whether the decision was read from a trace span.
    pub traced: bool,
}

/// The fingerprints of the decisions seen, by second of log time.
#[derive(Debug)]
pub struct DuplicateCheck {
    max: usize,
    seen: BTreeMap<i64, FxHashSet<u64>>,
    /// Fingerprints kept plus [`SECOND_COST`] per second.
    kept: usize,
    /// The newest second forgotten: decisions at or before it are unchecked.
    horizon: Option<i64>,
    found: Duplicates,
}

impl Default for DuplicateCheck {
    fn default() -> Self {
        DuplicateCheck::new(MAX_FINGERPRINTS)
    }
}

impl DuplicateCheck {
    /// A check remembering at most `max` fingerprints (at least 1).
    pub fn new(max: usize) -> DuplicateCheck {
        DuplicateCheck {
            max: max.max(1),
            seen: BTreeMap::new(),
            kept: 0,
            horizon: None,
            found: Duplicates::default(),
        }
    }

    /// Whether the decision is new (to be analysed); `false` for a
    /// duplicate of one seen before, which is counted.
    pub fn admit(&mut self, k: &DecisionKey<'_>) -> bool {
        let (Some(id), Some(ts)) = (k.request_id, k.ts.filter(|t| t.is_finite())) else {
            return true;
        };
        // Saturating: any finite time has a second.
        let second = ts.floor() as i64;
        if self.horizon.is_some_and(|h| second <= h) {
            self.found.unchecked += 1;
            return true;
        }
        // SipHash with fixed keys: the same fingerprint in every run.
        let mut h = DefaultHasher::new();
        k.deployment.hash(&mut h);
        id.hash(&mut h);
        k.profile.hash(&mut h);
        k.filter.hash(&mut h);
        ts.to_bits().hash(&mut h);
        k.traced.hash(&mut h);
        let set = self.seen.entry(second).or_insert_with(|| {
            self.kept += SECOND_COST;
            FxHashSet::default()
        });
        if !set.insert(h.finish()) {
            self.found.decisions += 1;
            return false;
        }
        self.kept += 1;
        while self.kept > self.max {
            let Some((s, set)) = self.seen.pop_first() else {
                break;
            };
            self.kept -= set.len() + SECOND_COST;
            self.horizon = Some(self.horizon.map_or(s, |h| h.max(s)));
        }
        true
    }

    /// What was found so far.
    pub fn found(&self) -> Duplicates {
        self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(dep: &str, id: &str, ts: f64) -> DecisionKey<'static> {
        DecisionKey {
            deployment: Box::leak(dep.to_string().into_boxed_str()),
            request_id: Some(Box::leak(id.to_string().into_boxed_str())),
            profile: Some("decode"),
            filter: Some("prefix-cache-affinity-filter"),
            ts: Some(ts),
            traced: false,
        }
    }

    #[test]
    fn the_same_key_twice_counts_once() {
        let mut c = DuplicateCheck::default();
        assert!(c.admit(&key("a", "r1", 10.25)));
        assert!(c.admit(&key("a", "r2", 10.25)));
        assert!(c.admit(&key("b", "r1", 10.25)));
        assert!(c.admit(&key("a", "r1", 10.5)));
        assert!(!c.admit(&key("a", "r1", 10.25)));
        let mut other = key("a", "r1", 10.25);
        other.profile = Some("prefill");
        assert!(c.admit(&other));
        other.profile = Some("decode");
        other.filter = Some("second-filter");
        assert!(c.admit(&other));
        other.filter = Some("prefix-cache-affinity-filter");
        other.traced = true;
        assert!(c.admit(&other));
        assert!(!c.admit(&other));
        assert_eq!(
            c.found(),
            Duplicates {
                decisions: 2,
                unchecked: 0
            }
        );
    }

    #[test]
    fn without_an_id_or_a_finite_time_nothing_is_a_duplicate() {
        let mut c = DuplicateCheck::default();
        let mut k = key("a", "r1", 1.0);
        k.request_id = None;
        assert!(c.admit(&k));
        assert!(c.admit(&k));
        let mut k = key("a", "r1", f64::NAN);
        assert!(c.admit(&k));
        assert!(c.admit(&k));
        k.ts = None;
        assert!(c.admit(&k));
        assert_eq!(c.found(), Duplicates::default());
    }

    #[test]
    fn past_the_bound_the_oldest_seconds_are_forgotten_and_counted() {
        let mut c = DuplicateCheck::new(3 * (1 + SECOND_COST));
        for (i, ts) in [1.0, 2.0, 3.0, 4.0].into_iter().enumerate() {
            assert!(c.admit(&key("a", &format!("r{i}"), ts)));
        }
        assert_eq!(c.kept, 3 * (1 + SECOND_COST));
        // Second 1 was forgotten: its copy is kept, unchecked.
        assert!(c.admit(&key("a", "r0", 1.0)));
        // Seconds 2-4 are remembered.
        assert!(!c.admit(&key("a", "r1", 2.0)));
        assert!(!c.admit(&key("a", "r3", 4.0)));
        assert_eq!(
            c.found(),
            Duplicates {
                decisions: 2,
                unchecked: 1
            }
        );
    }
}
