//! Decisions and vLLM stats lines seen twice are counted once (see [`DuplicateCheck`]).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use gatecal_parser::VllmStats;
use rustc_hash::FxHashSet;
use serde::Serialize;

/// Fingerprints kept at most (the decisions of the newest seconds).
pub const MAX_FINGERPRINTS: usize = 1 << 20;

/// What a second of log time remembered counts in [`MAX_FINGERPRINTS`]
/// besides its fingerprints: its set and map entry (about 130 bytes) are
/// worth about eight fingerprints (16 to 20 bytes each in a set).
pub const SECOND_COST: usize = 8;

/// What the duplicate check found, as reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Duplicates {
    /// Decisions seen before (the same deployment, request id, profile,
    /// filter instance and time): dropped, so each counts once.
    pub decisions: u64,
    /// Decisions at or before a second whose fingerprints were forgotten
    /// (past [`MAX_FINGERPRINTS`]): kept without the check.
    pub unchecked: u64,
    /// vLLM stats lines seen before (the same deployment, pod, engine,
    /// time and values): dropped, so each counts once.
    pub vllm_stats: u64,
    /// vLLM stats lines at or before a second whose fingerprints were
    /// forgotten: kept without the check.
    pub vllm_unchecked: u64,
    /// Prometheus samples read again (the same series, time and value):
    /// counted once (recommend; `PromEstimator`).
    pub prometheus: u64,
    /// Prometheus samples read again with another value (the same series
    /// and time): the first read is used, and a warning names them.
    pub prometheus_conflicts: u64,
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

/// What [`DuplicateCheck::remember`] found.
enum Seen {
    New,
    Before,
    Unchecked,
}

/// The fingerprints of the decisions and vLLM stats lines seen, by second
/// of log time.
///
/// The same log captured twice under two file names, or overlapping
/// `kubectl logs` captures concatenated, give the same decisions twice. A
/// decision is a duplicate of one seen before when both have the same
/// deployment, request id, scheduling profile, filter instance and time
/// (`ts`, to the bit), and both come from logs or decision records, or both
/// from trace spans (a traced decision is the span of a log decision, not a
/// copy of it: the join pairs them). A decision without a request id or a
/// finite time is never taken for a duplicate.
///
/// A vLLM stats line is a duplicate of one seen before when both have the
/// same deployment, pod, engine (`Engine 000`, or none for v0), wording,
/// time and values (every number of the line, to the bit). The time is
/// [`VllmStats::ts`] when known, else the record's month, day and time of
/// day. Two pods never share a line: an idle engine's line repeats its
/// values, but only within its own pod.
///
/// Memory: a fingerprint (a 64-bit hash of the key) per decision or stats
/// line, both kinds in one store, kept by second of log time (a stats line
/// without an absolute time by its month, day and time of day, counted from
/// the start of a year: older than any absolute time, forgotten first). At most [`MAX_FINGERPRINTS`] are kept, a second
/// counting as `SECOND_COST` fingerprints besides its own (a set per
/// second costs about that much): at most about 20 MiB, however sparse the
/// decisions. Past that the oldest second (by log time) is forgotten, and a later
/// decision at or before a forgotten second cannot be checked: it is kept,
/// and counted in [`Duplicates::unchecked`] (a stats line, in
/// [`Duplicates::vllm_unchecked`]). Decisions arrive roughly in
/// time order, so this happens only when a copy starts more than the
/// remembered span (about [`MAX_FINGERPRINTS`] decisions) before the newest
/// decision seen: the first part of the second copy of a log over about a
/// million decisions, or captures that overlap by more than that.
///
/// A 64-bit fingerprint takes two different decisions of the same second
/// for one with a probability of about `n² / 2⁶⁵` for `n` decisions in that
/// second: below 10⁻¹³ at 1,000 decisions a second.
#[derive(Debug)]
pub struct DuplicateCheck {
    max: usize,
    seen: BTreeMap<i64, FxHashSet<u64>>,
    /// Fingerprints kept plus [`SECOND_COST`] per second.
    kept: usize,
    /// The newest second forgotten: decisions at or before it are unchecked.
    horizon: Option<i64>,
    found: Duplicates,
    /// A decision's key as the bytes its fingerprint hashes (reused).
    key_bytes: Vec<u8>,
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
            key_bytes: Vec::new(),
        }
    }

    /// Whether the decision is new (to be analysed); `false` for a
    /// duplicate of one seen before, which is counted.
    pub fn admit(&mut self, k: &DecisionKey<'_>) -> bool {
        let (Some(id), Some(ts)) = (k.request_id, k.ts.filter(|t| t.is_finite())) else {
            return true;
        };
        // The key's fields, each tagged and length-prefixed (two keys give
        // the same bytes only when equal), hashed in one call: SipHash with
        // fixed keys, the same fingerprint in every run.
        let b = &mut self.key_bytes;
        b.clear();
        // Not a vLLM stats line's fingerprint (that stream starts `vllm`).
        b.push(b'd');
        for s in [Some(k.deployment), Some(id), k.profile, k.filter] {
            match s {
                None => b.push(0),
                Some(s) => {
                    b.push(1);
                    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
                    b.extend_from_slice(s.as_bytes());
                }
            }
        }
        b.extend_from_slice(&ts.to_bits().to_le_bytes());
        b.push(u8::from(k.traced));
        let mut h = DefaultHasher::new();
        h.write(b);
        // Saturating: any finite time has a second.
        match self.remember(ts.floor() as i64, h.finish()) {
            Seen::New => true,
            Seen::Unchecked => {
                self.found.unchecked += 1;
                true
            }
            Seen::Before => {
                self.found.decisions += 1;
                false
            }
        }
    }

    /// Whether the vLLM stats line is new (to be analysed); `false` for a
    /// duplicate of one seen before, which is counted.
    pub fn admit_vllm(&mut self, s: &VllmStats) -> bool {
        let mut h = DefaultHasher::new();
        // Not a decision's fingerprint, whatever the fields.
        "vllm".hash(&mut h);
        s.deployment.hash(&mut h);
        s.pod.hash(&mut h);
        s.engine.hash(&mut h);
        (s.version as u8).hash(&mut h);
        let relative = i64::from(s.month) * 31 * 86_400
            + i64::from(s.day) * 86_400
            + i64::from(s.seconds_of_day);
        let second = match s.ts.filter(|t| t.is_finite()) {
            Some(ts) => {
                ts.to_bits().hash(&mut h);
                ts.floor() as i64
            }
            None => {
                (s.month, s.day, s.seconds_of_day).hash(&mut h);
                // Before any absolute time of the store: a year counted
                // from i64::MIN / 2.
                i64::MIN / 2 + relative
            }
        };
        let bits = |v: Option<f64>| v.map(f64::to_bits);
        (
            s.prompt_throughput.to_bits(),
            bits(s.generation_throughput),
            s.running,
            s.waiting,
            s.swapped,
            s.deferred,
            s.preemptions,
        )
            .hash(&mut h);
        (
            bits(s.gpu_kv_cache_usage_pct),
            bits(s.cpu_kv_cache_usage_pct),
            bits(s.prefix_cache_hit_rate_pct),
            bits(s.mm_cache_hit_rate_pct),
        )
            .hash(&mut h);
        match self.remember(second, h.finish()) {
            Seen::New => true,
            Seen::Unchecked => {
                self.found.vllm_unchecked += 1;
                true
            }
            Seen::Before => {
                self.found.vllm_stats += 1;
                false
            }
        }
    }

    /// Looks the fingerprint up in its second, remembering it when new.
    fn remember(&mut self, second: i64, fingerprint: u64) -> Seen {
        if self.horizon.is_some_and(|h| second <= h) {
            return Seen::Unchecked;
        }
        // Decisions come roughly in time order: most are in the newest
        // second, reached without a search.
        let newest = self.seen.last_entry().filter(|e| *e.key() == second);
        let set = match newest {
            Some(e) => e.into_mut(),
            None => self.seen.entry(second).or_insert_with(|| {
                self.kept += SECOND_COST;
                FxHashSet::default()
            }),
        };
        if !set.insert(fingerprint) {
            return Seen::Before;
        }
        self.kept += 1;
        while self.kept > self.max {
            let Some((s, set)) = self.seen.pop_first() else {
                break;
            };
            self.kept -= set.len() + SECOND_COST;
            self.horizon = Some(self.horizon.map_or(s, |h| h.max(s)));
        }
        Seen::New
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
                ..Duplicates::default()
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
                unchecked: 1,
                ..Duplicates::default()
            }
        );
    }

    fn stats(pod: &str, ts: Option<f64>, prompt: f64) -> VllmStats {
        VllmStats {
            deployment: "a".into(),
            pod: Some(pod.into()),
            ts,
            month: 8,
            day: 21,
            seconds_of_day: 50_000,
            engine: Some("000".into()),
            prompt_throughput: prompt,
            running: Some(1),
            ..VllmStats::default()
        }
    }

    #[test]
    fn a_stats_line_twice_counts_once_and_apart_from_decisions() {
        let mut c = DuplicateCheck::default();
        let s = stats("p1", Some(10.0), 100.0);
        assert!(c.admit_vllm(&s));
        assert!(!c.admit_vllm(&s));
        // Another pod, engine, time or value is another line.
        assert!(c.admit_vllm(&stats("p2", Some(10.0), 100.0)));
        assert!(c.admit_vllm(&stats("p1", Some(20.0), 100.0)));
        assert!(c.admit_vllm(&stats("p1", Some(10.0), 100.5)));
        let mut e = s.clone();
        e.engine = Some("001".into());
        assert!(c.admit_vllm(&e));
        let mut w = s.clone();
        w.waiting = Some(3);
        assert!(c.admit_vllm(&w));
        // Without an absolute time, the record's month, day and time.
        let r = stats("p1", None, 100.0);
        assert!(c.admit_vllm(&r));
        assert!(!c.admit_vllm(&r));
        let mut later = r.clone();
        later.seconds_of_day += 10;
        assert!(c.admit_vllm(&later));
        // A decision at the same time is not a stats line.
        assert!(c.admit(&key("a", "r1", 10.0)));
        assert_eq!(
            c.found(),
            Duplicates {
                vllm_stats: 2,
                ..Duplicates::default()
            }
        );
    }

    #[test]
    fn stats_lines_past_the_bound_are_counted_unchecked() {
        let mut c = DuplicateCheck::new(2 * (1 + SECOND_COST));
        for ts in [1.0, 2.0, 3.0] {
            assert!(c.admit_vllm(&stats("p", Some(ts), 5.0)));
        }
        assert!(c.admit_vllm(&stats("p", Some(1.0), 5.0)));
        assert!(!c.admit_vllm(&stats("p", Some(3.0), 5.0)));
        assert_eq!(
            c.found(),
            Duplicates {
                vllm_stats: 1,
                vllm_unchecked: 1,
                ..Duplicates::default()
            }
        );
    }
}
