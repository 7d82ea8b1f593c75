//! Putting decisions back in log-time order (see [`Reorder`]).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::input::DecisionInput;

/// Default reorder window, seconds of log time.
pub const DEFAULT_REORDER_WINDOW_S: f64 = 30.0;

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
pub struct Reorder {
    window: f64,
    heap: BinaryHeap<Entry>,
    /// The decisions waiting, by slot (`None`: a free slot, listed in `free`).
    slots: Vec<Option<DecisionInput>>,
    free: Vec<usize>,
    newest: f64,
    seq: u64,
}

impl Reorder {
    /// A buffer holding decisions for `window` seconds of log time.
    pub fn new(window: f64) -> Reorder {
        Reorder {
            window,
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            newest: f64::NEG_INFINITY,
            seq: 0,
        }
    }

    /// Adds a decision; calls `out` with every decision now due, in order.
    pub fn push(&mut self, d: DecisionInput, out: &mut dyn FnMut(DecisionInput)) {
        let Some(ts) = d.ts.filter(|t| t.is_finite()) else {
            out(d);
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
        while self
            .heap
            .peek()
            .is_some_and(|e| e.ts < self.newest - self.window)
        {
            if let Some(e) = self.heap.pop()
                && let Some(d) = self.take(e.slot)
            {
                out(d);
            }
        }
    }

    /// Releases everything left, in order.
    pub fn finish(&mut self, out: &mut dyn FnMut(DecisionInput)) {
        while let Some(e) = self.heap.pop() {
            if let Some(d) = self.take(e.slot) {
                out(d);
            }
        }
    }

    /// Empties a slot and lists it as free.
    fn take(&mut self, slot: usize) -> Option<DecisionInput> {
        self.free.push(slot);
        self.slots[slot].take()
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
}
