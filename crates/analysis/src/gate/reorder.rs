//! Putting decisions back in log-time order (see [`Reorder`]).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use crate::input::DecisionInput;

/// Default reorder window, seconds of log time.
pub const DEFAULT_REORDER_WINDOW_S: f64 = 30.0;

/// What a [`Reorder`] holds: something with a log time (a decision).
pub trait Timed {
    /// Its time, seconds since the Unix epoch, when known.
    fn time(&self) -> Option<f64>;
}

impl Timed for DecisionInput {
    fn time(&self) -> Option<f64> {
        self.ts
    }
}

struct Entry {
    ts: f64,
    /// `ts` as an integer that orders as `f64::total_cmp` orders `ts`: the
    /// heap compares integers.
    key: i64,
    seq: u64,
    /// The decision's slot in [`Reorder`]'s `slots`: the heap moves its
    /// entries on every push and pop, and a decision is a few hundred bytes.
    slot: usize,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we pop the oldest.
        o.key.cmp(&self.key).then(o.seq.cmp(&self.seq))
    }
}

/// The bits of `ts` arranged so that signed integer order is
/// `f64::total_cmp`'s order (negative values have their magnitude bits
/// flipped).
fn order_key(ts: f64) -> i64 {
    let b = ts.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

/// A reorder buffer.
///
/// The parser emits a decision when its request completes (`Request
/// handled`), so a decision can come out after a later request's decision.
/// The reconstruction carries endpoint loads forward and must see decisions
/// in the order the EPP made them, so they pass through a buffer that
/// releases a decision once the newest decision time seen is more than
/// `window` seconds past it, oldest first (ties in arrival order).
/// Memory is bounded by the decisions of one window: they wait in slots that
/// are reused, so a decision costs no allocation of its own. Decisions
/// without a time pass straight through.
///
/// Feed it with [`Reorder::push`] and [`Reorder::finish`], which hand the
/// decisions due to a callback, or with [`Reorder::insert`] and
/// [`Reorder::pop_due`] (then [`Reorder::pop`] at the end), which let the
/// owner of the buffer take them one at a time: the analyses do so.
pub struct Reorder<T = DecisionInput> {
    window: f64,
    heap: BinaryHeap<Entry>,
    /// Decisions without a time, due at once (before any other: they make
    /// nothing else due).
    untimed: VecDeque<T>,
    /// The decisions waiting, by slot (`None`: a free slot, listed in `free`).
    slots: Vec<Option<T>>,
    free: Vec<usize>,
    newest: f64,
    seq: u64,
}

impl<T: Timed> Reorder<T> {
    /// A buffer holding decisions for `window` seconds of log time.
    pub fn new(window: f64) -> Reorder<T> {
        Reorder {
            window,
            heap: BinaryHeap::new(),
            untimed: VecDeque::new(),
            slots: Vec::new(),
            free: Vec::new(),
            newest: f64::NEG_INFINITY,
            seq: 0,
        }
    }

    /// Adds a decision; calls `out` with every decision now due, in order.
    pub fn push(&mut self, d: T, out: &mut dyn FnMut(T)) {
        self.insert(d);
        while let Some(d) = self.pop_due() {
            out(d);
        }
    }

    /// Releases everything left, in order.
    pub fn finish(&mut self, out: &mut dyn FnMut(T)) {
        while let Some(d) = self.pop() {
            out(d);
        }
    }

    /// Adds a decision. Take the decisions it makes due with
    /// [`Reorder::pop_due`] before the next one is added.
    pub fn insert(&mut self, d: T) {
        let Some(ts) = d.time().filter(|t| t.is_finite()) else {
            self.untimed.push_back(d);
            return;
        };
        self.newest = self.newest.max(ts);
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(d);
                i
            }
            None => {
                self.slots.push(Some(d));
                self.slots.len() - 1
            }
        };
        self.heap.push(Entry {
            ts,
            key: order_key(ts),
            seq: self.seq,
            slot,
        });
    }

    /// The next decision due, oldest first: one without a time, else the
    /// oldest more than the window older than the newest time seen.
    pub fn pop_due(&mut self) -> Option<T> {
        if let Some(d) = self.untimed.pop_front() {
            return Some(d);
        }
        while self
            .heap
            .peek()
            .is_some_and(|e| e.ts < self.newest - self.window)
        {
            if let Some(e) = self.heap.pop()
                && let Some(d) = self.take(e.slot)
            {
                return Some(d);
            }
        }
        None
    }

    /// The next decision, due or not, oldest first: to empty the buffer at
    /// the end.
    pub fn pop(&mut self) -> Option<T> {
        if let Some(d) = self.untimed.pop_front() {
            return Some(d);
        }
        while let Some(e) = self.heap.pop() {
            if let Some(d) = self.take(e.slot) {
                return Some(d);
            }
        }
        None
    }

    /// Empties a slot and lists it as free.
    fn take(&mut self, slot: usize) -> Option<T> {
        self.free.push(slot);
        self.slots[slot].take()
    }
}

/// The order in which a [`Reorder`] of `window` seconds releases items of
/// times `times` (in the order they arrive), each pushed in turn and the
/// buffer emptied at the end: their arrival ranks, in release order. Lets
/// a reader hold only the times while it works out the order, and then
/// give the items, read again, in that order.
pub fn release_order(times: impl IntoIterator<Item = Option<f64>>, window: f64) -> Vec<u32> {
    struct At(Option<f64>, u32);
    impl Timed for At {
        fn time(&self) -> Option<f64> {
            self.0
        }
    }
    let mut r = Reorder::new(window);
    let mut out = Vec::new();
    for (i, t) in times.into_iter().enumerate() {
        r.push(At(t, i as u32), &mut |a| out.push(a.1));
    }
    r.finish(&mut |a| out.push(a.1));
    out
}

/// An analysis that takes its decisions in log-time order through its own
/// [`Reorder`]: [`crate::GateDist`] and [`crate::Recommend`] both feed
/// theirs this one way, each decision handled as soon as it is due.
pub(crate) trait InOrder {
    /// The analysis's buffer.
    fn buffer(&mut self) -> &mut Reorder;

    /// Handles one decision, in log-time order.
    fn take(&mut self, d: DecisionInput);

    /// Adds a decision to the buffer and handles every decision now due,
    /// in order.
    fn feed(&mut self, d: DecisionInput) {
        self.buffer().insert(d);
        while let Some(d) = self.buffer().pop_due() {
            self.take(d);
        }
    }

    /// Handles every decision still in the buffer, in order.
    fn drain(&mut self) {
        while let Some(d) = self.buffer().pop() {
            self.take(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(ts: f64, id: &str) -> DecisionInput {
        DecisionInput {
            ts: Some(ts),
            request_id: Some(id.into()),
            ..DecisionInput::default()
        }
    }

    #[test]
    fn order_keys_order_as_total_cmp() {
        let v = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            1.5,
            1.7e9,
            f64::MAX,
            f64::INFINITY,
        ];
        for a in v {
            for b in v {
                assert_eq!(order_key(a).cmp(&order_key(b)), a.total_cmp(&b), "{a} {b}");
            }
        }
    }

    #[test]
    fn releases_in_time_order_after_the_window() {
        let mut r = Reorder::new(1.0);
        let mut got = Vec::new();
        let mut out = |x: DecisionInput| got.push(x.request_id.unwrap_or_default());
        r.push(d(10.0, "b"), &mut out);
        r.push(d(9.5, "a"), &mut out);
        r.push(d(10.2, "c"), &mut out);
        r.push(DecisionInput::default(), &mut out);
        r.push(d(12.0, "e"), &mut out);
        r.finish(&mut out);
        assert_eq!(got, vec!["", "a", "b", "c", "e"]);
    }

    /// Records what it takes, and when (after which decision fed).
    struct Stage {
        reorder: Reorder,
        fed: usize,
        got: Vec<(usize, String)>,
    }

    impl InOrder for Stage {
        fn buffer(&mut self) -> &mut Reorder {
            &mut self.reorder
        }

        fn take(&mut self, d: DecisionInput) {
            self.got
                .push((self.fed, d.request_id.unwrap_or_default().to_string()));
        }
    }

    #[test]
    fn a_stage_fed_in_order_takes_each_decision_when_it_is_due() {
        let mut s = Stage {
            reorder: Reorder::new(1.0),
            fed: 0,
            got: Vec::new(),
        };
        let input = [
            d(10.0, "b"),
            d(9.5, "a"),
            DecisionInput::default(),
            d(10.2, "c"),
            d(11.1, "d"),
            d(f64::NAN, "nan"),
            d(12.0, "e"),
        ];
        for x in input {
            s.fed += 1;
            s.feed(x);
        }
        s.fed += 1;
        s.drain();
        let at = |n: usize, id: &str| (n, id.to_string());
        assert_eq!(
            s.got,
            [
                // Without a (finite) time: at once.
                at(3, ""),
                // 11.1 makes 9.5 and 10.0 older than the window.
                at(5, "a"),
                at(5, "b"),
                at(6, "nan"),
                at(7, "c"),
                // The rest at the end, oldest first.
                at(8, "d"),
                at(8, "e"),
            ]
        );
        assert!(s.reorder.pop().is_none() && s.reorder.pop_due().is_none());
    }

    #[test]
    fn the_release_order_is_the_order_the_buffer_gives() {
        let times = [
            Some(10.0),
            Some(9.5),
            None,
            Some(10.2),
            Some(11.1),
            Some(f64::NAN),
            Some(12.0),
            Some(10.0),
        ];
        let mut r = Reorder::new(1.0);
        let mut want = Vec::new();
        let mut out = |x: DecisionInput| want.push(x.request_id.unwrap().parse::<u32>().unwrap());
        for (i, t) in times.iter().enumerate() {
            let x = DecisionInput {
                ts: *t,
                request_id: Some(i.to_string().into()),
                ..DecisionInput::default()
            };
            r.push(x, &mut out);
        }
        r.finish(&mut out);
        // Out of arrival order: the buffer did reorder them.
        assert_ne!(want, (0..times.len() as u32).collect::<Vec<_>>());
        assert_eq!(release_order(times, 1.0), want);
    }
}
