//! What a partial report records of the parts it was made of and that a
//! run's accumulators gather as they go: each part's span
//! ([`PartInfo`]), and the keys of the decisions that name no EPP pod
//! ([`KeySample`]), by which two parts that count one decision twice are
//! found.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One partial report merged: where it came from and what it covers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartInfo {
    /// Where the merge read it: the file, or `-:N` for the `N`-th document
    /// of standard input (`null` in a partial as written).
    pub source: Option<String>,
    /// The run's inputs, in the order read.
    pub inputs: Vec<String>,
    /// The run's `--since`, seconds since the epoch (`null`: not set).
    pub since: Option<f64>,
    /// The run's `--until` (`null`: not set).
    pub until: Option<f64>,
    /// First counted decision time.
    pub first_ts: Option<f64>,
    /// Last counted decision time.
    pub last_ts: Option<f64>,
    /// Decisions counted.
    pub decisions: u64,
    /// The gatecal version that wrote it.
    pub producer: String,
}

/// One in this many decisions without a pod name is sampled, past
/// [`ALL_KEYS`].
const SAMPLE_ONE_IN: u64 = 64;
/// A part with at most this many decisions without a pod name keeps every
/// key.
const ALL_KEYS: usize = 4096;

/// The keys (request id and time, hashed) of the decisions without a pod
/// name: all of them up to [`ALL_KEYS`], then the one in [`SAMPLE_ONE_IN`]
/// whose hash is a multiple of it. Two parts share a key of every decision
/// they both count when one of them keeps all its keys, and otherwise of
/// about one in 64 of them.
#[derive(Debug, Default)]
pub(crate) struct KeySample {
    keys: Vec<u64>,
    sampled: bool,
    /// Per input (`""`: stdin without a name), the first and last counted
    /// decision: the streams of these decisions.
    sources: BTreeMap<String, [Option<f64>; 2]>,
}

/// The stream of a deployment's decisions that name no pod, read from
/// `source` (`""`: unknown).
pub(crate) fn unnamed_stream(deployment: &str, source: &str) -> String {
    if source.is_empty() {
        format!("{deployment}/")
    } else {
        format!("{deployment}/{INPUT_STREAM}{source}")
    }
}

/// What names an input, not a pod, in a stream's key.
pub(crate) const INPUT_STREAM: &str = "input:";

impl KeySample {
    /// Adds a counted decision whose lines name no pod, read from
    /// `source` (its key: nothing without a request id).
    pub(crate) fn add(&mut self, request_id: Option<&str>, ts: Option<f64>, source: Option<&str>) {
        use std::hash::{BuildHasher, Hash, Hasher};
        let span = self
            .sources
            .entry(source.unwrap_or_default().to_string())
            .or_insert([None, None]);
        *span = [min_opt(span[0], ts), max_opt(span[1], ts)];
        let Some(id) = request_id else { return };
        let mut h = rustc_hash::FxBuildHasher.build_hasher();
        id.hash(&mut h);
        ts.map(f64::to_bits).hash(&mut h);
        let k = h.finish();
        if !self.sampled {
            self.keys.push(k);
            if self.keys.len() > ALL_KEYS {
                self.sample();
            }
        } else if k.is_multiple_of(SAMPLE_ONE_IN) {
            self.keys.push(k);
        }
    }

    /// The streams of the decisions added: `deployment/input:SOURCE`, or
    /// `deployment/` for those of an unnamed input, with their first and
    /// last decision.
    pub(crate) fn streams(
        &self,
        deployment: &str,
    ) -> impl Iterator<Item = (String, [Option<f64>; 2])> + '_ {
        let deployment = deployment.to_string();
        self.sources
            .iter()
            .map(move |(s, span)| (unnamed_stream(&deployment, s), *span))
    }

    fn sample(&mut self) {
        self.sampled = true;
        self.keys.retain(|k| k.is_multiple_of(SAMPLE_ONE_IN));
    }

    /// The keys of several deployments' samples, sorted: every key when
    /// there are at most [`ALL_KEYS`] of them, else the sample.
    pub(crate) fn combine(parts: Vec<KeySample>) -> Vec<u64> {
        let sampled = parts.iter().any(|p| p.sampled)
            || parts.iter().map(|p| p.keys.len()).sum::<usize>() > ALL_KEYS;
        let mut keys: Vec<u64> = parts.into_iter().flat_map(|p| p.keys).collect();
        if sampled {
            keys.retain(|k| k.is_multiple_of(SAMPLE_ONE_IN));
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// The smaller of two optional times (either when one is `None`).
pub(crate) fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// The larger of two optional times (either when one is `None`).
pub(crate) fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}
