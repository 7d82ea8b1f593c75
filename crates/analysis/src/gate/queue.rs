//! The per-endpoint queue model of the reconstruction (see
//! [`crate::Reconstructor`]): the uncached tokens of each request in flight,
//! drained front first at the deployment's measured drain rate.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use serde::Serialize;

/// Queued requests kept per endpoint; older ones are merged.
const MAX_QUEUED: usize = 256;

/// One endpoint's estimated queue: the uncached tokens of the requests in
/// flight, oldest first, as of `ts`. The EPP releases a request's tokens at
/// its first streamed chunk, and vLLM prefills waiting requests first come,
/// first served, so the queue drains front first, one whole request at a time.
#[derive(Clone, Debug)]
pub(crate) struct Obs {
    pub(crate) ts: f64,
    pub(crate) items: std::collections::VecDeque<f64>,
    /// Tokens of the front request already prefilled.
    pub(crate) head_done: f64,
}

impl Obs {
    pub(crate) fn new(ts: f64, tokens: f64) -> Obs {
        let mut items = std::collections::VecDeque::new();
        if tokens > 0.0 {
            items.push_back(tokens);
        }
        Obs {
            ts,
            items,
            head_done: 0.0,
        }
    }

    pub(crate) fn total(&self) -> f64 {
        self.items.iter().sum()
    }

    /// In-flight tokens at `ts` after draining at `rate` (front first).
    pub(crate) fn at(&self, ts: f64, rate: Option<f64>) -> f64 {
        let Some(r) = rate.filter(|_| ts > self.ts) else {
            return self.total();
        };
        let mut budget = r * (ts - self.ts) + self.head_done;
        // The requests drained whole, front first, then the sum of the rest
        // in queue order (plain slice loops: the ring's two halves).
        let (front, back) = self.items.as_slices();
        let drained = |part: &[f64], budget: &mut f64| {
            part.iter()
                .position(|&it| {
                    if *budget >= it {
                        *budget -= it;
                        false
                    } else {
                        true
                    }
                })
                .unwrap_or(part.len())
        };
        let k = drained(front, &mut budget);
        let (front, back) = if k == front.len() {
            (&back[drained(back, &mut budget)..], &[][..])
        } else {
            (&front[k..], back)
        };
        let mut left = 0.0;
        for &it in front.iter().chain(back) {
            left += it;
        }
        left
    }

    /// Drains to `ts`; returns whether a request finished (left the queue).
    pub(crate) fn advance(&mut self, ts: f64, rate: Option<f64>) -> bool {
        let len = self.items.len();
        if let Some(r) = rate.filter(|_| ts > self.ts) {
            let mut budget = r * (ts - self.ts) + self.head_done;
            self.head_done = 0.0;
            while let Some(&front) = self.items.front() {
                if budget >= front {
                    budget -= front;
                    self.items.pop_front();
                } else {
                    self.head_done = budget;
                    break;
                }
            }
        }
        if ts > self.ts || self.ts.is_nan() {
            self.ts = ts;
        }
        self.items.len() != len
    }

    /// A measurement: the queue holds `m` tokens now. Within the measurement
    /// noise (2 % + 256 tokens) the queue is kept as it is, so a long
    /// prefill's progress is not lost. Below it, requests at the front that
    /// must have finished are dropped and the rest taken off the newest
    /// requests; above it, the difference joins as one block (load this EPP
    /// did not route). `total` is [`Obs::total`] before the call (the caller
    /// has it at hand; it is summed again only when requests finished).
    pub(crate) fn measure(&mut self, ts: f64, m: f64, rate: Option<f64>, total: f64) {
        let mut total = if self.advance(ts, rate) {
            self.total()
        } else {
            total
        };
        let tol = 0.02 * total.max(m) + 256.0;
        if (total - m).abs() <= tol {
            return;
        }
        if m > total {
            self.items.push_back(m - total);
            return;
        }
        while let Some(&front) = self.items.front() {
            if total - front >= m - tol {
                total -= front;
                self.items.pop_front();
                self.head_done = 0.0;
            } else {
                break;
            }
        }
        let mut excess = total - m;
        while excess > 0.0 {
            let Some(back) = self.items.back_mut() else {
                break;
            };
            if *back > excess {
                *back -= excess;
                excess = 0.0;
            } else {
                excess -= *back;
                self.items.pop_back();
            }
        }
        if self.items.is_empty() {
            self.head_done = 0.0;
            if m > 0.0 {
                self.items.push_back(m);
            }
        }
    }

    /// A request of `tokens` uncached tokens joins the queue.
    pub(crate) fn add(&mut self, ts: f64, tokens: f64, rate: Option<f64>) {
        let _ = self.advance(ts, rate);
        if tokens > 0.0 {
            self.items.push_back(tokens);
        }
        if self.items.len() > MAX_QUEUED {
            let a = self.items.pop_front().unwrap_or(0.0);
            if let Some(b) = self.items.front_mut() {
                *b += a;
            }
        }
    }
}

/// The bits of `ts` arranged so that signed integer order is
/// `f64::total_cmp`'s order.
fn order_key(ts: f64) -> i64 {
    let b = ts.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

/// Whether an endpoint estimated at `seen` is fresh at `ts`: estimated no
/// longer than `staleness` seconds before (an estimate from later than `ts`
/// is fresh too). An unknown time on either side counts as fresh: nothing
/// says the estimate is old, so the carried-forward load is trusted. The
/// one rule of the reconstruction (the non-sticky side of a narrowed
/// decision, the keep-all estimates, the sticky uncached samples).
pub(crate) fn is_fresh(ts: f64, seen: f64, staleness: f64) -> bool {
    ts.is_nan() || seen.is_nan() || ts - seen <= staleness
}

/// Rate samples kept per deployment for the drain estimate.
pub(crate) const DRAIN_SAMPLES: usize = 512;
/// Samples needed before carried-forward loads are drained.
pub(crate) const MIN_DRAIN_SAMPLES: usize = 8;

/// Endpoints a deployment holds before it keeps a time index of them:
/// fewer are scanned, which costs less than keeping the index up to date on
/// every estimate.
pub(crate) const INDEX_FROM: usize = 64;

/// One deployment's endpoints and its drain-rate samples.
#[derive(Debug, Default)]
pub(crate) struct DepTracker {
    /// Each endpoint's index in `eps`.
    index: FxHashMap<String, usize>,
    /// The endpoints' queues, in order of first sight. Changed only through
    /// [`DepTracker::insert`] and [`DepTracker::ep_mut`], which keep
    /// `by_ts` in step.
    eps: Vec<Obs>,
    /// Whether `by_ts` and `untimed` are kept: from [`INDEX_FROM`]
    /// endpoints on.
    indexed: bool,
    /// `(time key, index)` of every endpoint with a known time: the
    /// endpoints observed since a time, found without a scan of all of
    /// them (a deployment may hold thousands: the pooled one).
    by_ts: BTreeSet<(i64, usize)>,
    /// Endpoints with no known time (always fresh).
    untimed: BTreeSet<usize>,
    /// Recent `(tokens gone, seconds)` pairs of busy endpoints (a ring of
    /// `DRAIN_SAMPLES`).
    pub(crate) rates: Vec<(f64, f64)>,
    pub(crate) next: usize,
    pub(crate) total_samples: u64,
    /// Sums over `rates`, kept as samples come and go.
    sum_gone: f64,
    sum_secs: f64,
    /// Sticky uncached samples taken so far.
    sticky_inserts: u64,
    /// Tokens gone over seconds elapsed, summed over `rates`.
    pub(crate) rate: Option<f64>,
    /// Recent `tokenLoad`s of sticky survivors whose queue was surely empty:
    /// the request's own uncached tokens on a sticky endpoint.
    pub(crate) sticky_uncached: Vec<f64>,
    pub(crate) sticky_next: usize,
    /// Their median, once there are enough.
    pub(crate) sticky_uncached_est: Option<f64>,
}

impl DepTracker {
    /// The index of an endpoint in `eps`, once seen.
    pub(crate) fn id(&self, endpoint: &str) -> Option<usize> {
        self.index.get(endpoint).copied()
    }

    /// Adds an endpoint not seen before.
    pub(crate) fn insert(&mut self, endpoint: &str, o: Obs) {
        let i = self.eps.len();
        self.index.insert(endpoint.to_string(), i);
        if self.indexed {
            self.file(i, o.ts);
        }
        self.eps.push(o);
        if !self.indexed && self.eps.len() >= INDEX_FROM {
            self.indexed = true;
            for i in 0..self.eps.len() {
                self.file(i, self.eps[i].ts);
            }
        }
    }

    /// An endpoint's queue.
    pub(crate) fn ep(&self, i: usize) -> &Obs {
        &self.eps[i]
    }

    /// Changes an endpoint's queue (its time index follows).
    pub(crate) fn ep_mut<R>(&mut self, i: usize, f: impl FnOnce(&mut Obs) -> R) -> R {
        let before = self.eps[i].ts;
        let r = f(&mut self.eps[i]);
        let after = self.eps[i].ts;
        if self.indexed && before.to_bits() != after.to_bits() {
            if before.is_nan() {
                self.untimed.remove(&i);
            } else {
                self.by_ts.remove(&(order_key(before), i));
            }
            self.file(i, after);
        }
        r
    }

    fn file(&mut self, i: usize, ts: f64) {
        if ts.is_nan() {
            self.untimed.insert(i);
        } else {
            self.by_ts.insert((order_key(ts), i));
        }
    }

    /// Calls `f` with every endpoint fresh at `ts` ([`is_fresh`]), in no
    /// particular order. Once the deployment holds [`INDEX_FROM`]
    /// endpoints, only those observed since about `ts - staleness` are
    /// visited.
    pub(crate) fn each_fresh(&self, ts: f64, staleness: f64, mut f: impl FnMut(usize, &Obs)) {
        let from = ts - staleness - 1.0;
        if ts.is_nan() || from.is_nan() {
            for (i, o) in self.eps.iter().enumerate() {
                f(i, o);
            }
            return;
        }
        if !self.indexed {
            for (i, o) in self.eps.iter().enumerate() {
                if is_fresh(ts, o.ts, staleness) {
                    f(i, o);
                }
            }
            return;
        }
        for &i in &self.untimed {
            f(i, &self.eps[i]);
        }
        // One second below the bound, then the exact test: the subtraction
        // rounds.
        for &(_, i) in self.by_ts.range((order_key(from), 0)..) {
            let o = &self.eps[i];
            if is_fresh(ts, o.ts, staleness) {
                f(i, o);
            }
        }
    }

    /// An endpoint's in-flight tokens at `ts`, drained since its observation.
    pub(crate) fn now(&self, o: &Obs, ts: f64) -> f64 {
        o.at(ts, self.rate)
    }

    pub(crate) fn add_sticky_uncached(&mut self, v: f64) {
        if self.sticky_uncached.len() < DRAIN_SAMPLES {
            self.sticky_uncached.push(v);
        } else {
            self.sticky_uncached[self.sticky_next] = v;
            self.sticky_next = (self.sticky_next + 1) % DRAIN_SAMPLES;
        }
        self.sticky_inserts += 1;
        // The median moves slowly: recompute it every 16 samples (O(n) select).
        let n = self.sticky_uncached.len();
        if n >= MIN_DRAIN_SAMPLES
            && (self.sticky_uncached_est.is_none() || self.sticky_inserts.is_multiple_of(16))
        {
            let mut w = self.sticky_uncached.clone();
            let (_, m, _) = w.select_nth_unstable_by(n / 2, f64::total_cmp);
            self.sticky_uncached_est = Some(*m);
        }
    }

    pub(crate) fn add_rate(&mut self, gone: f64, secs: f64) {
        if self.rates.len() < DRAIN_SAMPLES {
            self.rates.push((gone, secs));
            self.sum_gone += gone;
            self.sum_secs += secs;
        } else {
            let (og, os) = self.rates[self.next];
            self.rates[self.next] = (gone, secs);
            self.sum_gone += gone - og;
            self.sum_secs += secs - os;
            self.next = (self.next + 1) % DRAIN_SAMPLES;
            if self.next == 0 {
                // Running sums drift by rounding: renew them once a lap.
                let (g, t) = self
                    .rates
                    .iter()
                    .fold((0.0, 0.0), |(g, t), (a, b)| (g + a, t + b));
                self.sum_gone = g;
                self.sum_secs = t;
            }
        }
        self.total_samples += 1;
        if self.rates.len() >= MIN_DRAIN_SAMPLES {
            let (g, t) = (self.sum_gone, self.sum_secs);
            self.rate = (t > 0.0).then(|| (g / t).max(0.0));
        }
    }
}

/// A deployment's drain-rate estimate: how fast an endpoint's in-flight
/// tokens fall while it is busy, seen from the EPP's own accounting.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DrainRate {
    /// Tokens gone per second over the recent samples, per endpoint.
    pub median: f64,
    /// Samples taken over the whole input.
    pub samples: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The endpoints `each_fresh` visits, sorted.
    fn fresh(t: &DepTracker, ts: f64, staleness: f64) -> Vec<usize> {
        let mut v = Vec::new();
        t.each_fresh(ts, staleness, |i, _| v.push(i));
        v.sort_unstable();
        v
    }

    /// Every endpoint passing the freshness test, by a scan.
    fn scan(t: &DepTracker, ts: f64, staleness: f64) -> Vec<usize> {
        (0..t.eps.len())
            .filter(|&i| is_fresh(ts, t.ep(i).ts, staleness))
            .collect()
    }

    /// Below [`INDEX_FROM`] endpoints (a scan) and from it on (the time
    /// index, built when the deployment reaches it and kept as estimates
    /// move), the same endpoints as a scan.
    #[test]
    fn the_time_index_finds_the_fresh_endpoints_as_a_scan_does() {
        for extra in [0, INDEX_FROM] {
            let mut t = DepTracker::default();
            // Times in and out of order, repeated, unknown, far apart.
            let times = [
                100.0,
                130.0,
                f64::NAN,
                99.5,
                130.0,
                1e9,
                -5.0,
                160.25,
                100.0 + 1e-9,
            ];
            for (i, &ts) in times.iter().enumerate() {
                t.insert(&format!("ns/p-{i}"), Obs::new(ts, 100.0));
            }
            // Estimates move forward (and an unknown time becomes known).
            t.ep_mut(0, |o| o.add(140.0, 10.0, None));
            t.ep_mut(2, |o| o.add(150.0, 10.0, None));
            t.ep_mut(3, |o| o.measure(90.0, 5.0, None, 100.0));
            // Endpoints seen long ago, enough of them to index the rest.
            for k in 0..extra {
                t.insert(&format!("ns/old-{k}"), Obs::new(-1e6 - k as f64, 1.0));
            }
            assert_eq!(t.indexed, extra > 0);
            // An estimate that moves once the index is kept.
            t.ep_mut(1, |o| o.add(135.0, 10.0, None));
            for ts in [f64::NAN, 100.0, 129.0, 130.0, 145.0, 190.0, 1e9 + 1.0] {
                for staleness in [0.0, 1e-9, 30.0, 60.0, f64::INFINITY] {
                    assert_eq!(
                        fresh(&t, ts, staleness),
                        scan(&t, ts, staleness),
                        "ts {ts} staleness {staleness} extra {extra}"
                    );
                }
            }
            // Observed at 140 or later (a future observation too).
            assert_eq!(fresh(&t, 150.0, 10.0), vec![0, 2, 5, 7], "extra {extra}");
            assert_eq!(fresh(&t, 140.0, 5.0), vec![0, 1, 2, 5, 7], "extra {extra}");
        }
    }

    /// A queue of requests of 1 000 and 500 uncached tokens at t = 0.
    fn two_requests() -> Obs {
        let mut o = Obs::new(0.0, 1_000.0);
        o.add(0.0, 500.0, None);
        o
    }

    fn items(o: &Obs) -> Vec<f64> {
        o.items.iter().copied().collect()
    }

    #[test]
    fn a_queue_drains_front_first_one_whole_request_at_a_time() {
        let o = two_requests();
        // No rate, or no time passed: nothing drains.
        assert_eq!(o.at(10.0, None), 1_500.0);
        assert_eq!(o.at(0.0, Some(400.0)), 1_500.0);
        // 400 tokens/s for 2 s = 800 < 1 000: the front request is still
        // there, and so is all of its load.
        assert_eq!(o.at(2.0, Some(400.0)), 1_500.0);
        // For 3 s: 1 200 >= 1 000, the front request is gone; the 200 left
        // over does not finish the next one (500).
        assert_eq!(o.at(3.0, Some(400.0)), 500.0);
        // For 4 s: 1 600 >= 1 000 + 500: both gone.
        assert_eq!(o.at(4.0, Some(400.0)), 0.0);
        // Advancing keeps the front request's progress: 800 done at 2 s,
        // then 1 s more makes 1 200 and the front request finishes.
        let mut o = two_requests();
        assert!(!o.advance(2.0, Some(400.0)));
        assert_eq!(o.head_done, 800.0);
        assert_eq!(o.at(3.0, Some(400.0)), 500.0);
        assert!(o.advance(3.0, Some(400.0)));
        assert_eq!(items(&o), vec![500.0]);
        assert_eq!(o.head_done, 200.0);
    }

    #[test]
    fn a_measurement_keeps_reconciles_or_adds_to_the_queue() {
        // Within the noise, 2 % of max(1 500, m) + 256 = 286: kept as is.
        let mut o = two_requests();
        o.measure(0.0, 1_300.0, None, 1_500.0);
        assert_eq!(items(&o), vec![1_000.0, 500.0]);
        // Above it: the 1 500 more join as one block (load this EPP did not
        // route).
        o.measure(0.0, 3_000.0, None, 1_500.0);
        assert_eq!(items(&o), vec![1_000.0, 500.0, 1_500.0]);
        // Below it: 600 of 3 000 (noise 2 % of 3 000 + 256 = 316). Front
        // requests that must have finished go: without 1 000, 2 000 >= 600 -
        // 316; without 500 more, 1 500 >= 284; without the last, 0 < 284:
        // it stays. Then the newest request gives up the excess, 1 500 -
        // 600: 600 left.
        o.measure(0.0, 600.0, None, 3_000.0);
        assert_eq!(items(&o), vec![600.0]);
        // An empty measurement empties it.
        o.measure(0.0, 0.0, None, 600.0);
        assert!(o.items.is_empty());
        assert_eq!(o.total(), 0.0);
        // A measurement drains to its time first: at 400 tokens/s, 3 s
        // leave 500 of the two requests, which 520 matches within noise.
        let mut o = two_requests();
        o.measure(3.0, 520.0, Some(400.0), 1_500.0);
        assert_eq!(items(&o), vec![500.0]);
    }

    #[test]
    fn a_long_queue_merges_its_oldest_requests() {
        let mut o = Obs::new(0.0, 1.0);
        for k in 2..=(MAX_QUEUED as u32 + 2) {
            o.add(0.0, f64::from(k), None);
        }
        // 258 requests of 1, 2, ..., 258 tokens: the two oldest merged
        // twice, 1 + 2 = 3 then 3 + 3 = 6, the total unchanged.
        assert_eq!(o.items.len(), MAX_QUEUED);
        assert_eq!(o.items[0], 6.0);
        assert_eq!(o.total(), f64::from(258 * 259 / 2));
    }

    #[test]
    fn freshness_is_one_rule_with_unknown_times_fresh() {
        assert!(is_fresh(130.0, 100.0, 30.0));
        assert!(!is_fresh(130.5, 100.0, 30.0));
        // An estimate from after the decision (lines slightly out of order).
        assert!(is_fresh(100.0, 105.0, 30.0));
        assert!(is_fresh(f64::NAN, 100.0, 30.0));
        assert!(is_fresh(100.0, f64::NAN, 30.0));
        assert!(is_fresh(f64::NAN, f64::NAN, 0.0));
    }

    #[test]
    fn the_drain_rate_is_a_ratio_of_sums_once_there_are_enough_samples() {
        let mut t = DepTracker::default();
        for _ in 0..MIN_DRAIN_SAMPLES - 1 {
            t.add_rate(1_000.0, 2.0);
        }
        assert_eq!(t.rate, None);
        // Eight samples: 7 × 1 000 + 2 200 tokens over 7 × 2 + 0.5 s =
        // 9 200 / 14.5.
        t.add_rate(2_200.0, 0.5);
        assert_eq!(t.rate, Some(9_200.0 / 14.5));
        // Beyond the ring's 512 samples the oldest go: 512 samples of
        // (300, 1) leave 300 tokens/s.
        for _ in 0..DRAIN_SAMPLES {
            t.add_rate(300.0, 1.0);
        }
        assert_eq!(t.rate, Some(300.0));
        assert_eq!(t.total_samples, (MIN_DRAIN_SAMPLES + DRAIN_SAMPLES) as u64);
    }
}
