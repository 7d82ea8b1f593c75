//! The decisions of the last `--window` of log time, kept as gzip blocks
//! of decision records.

use std::collections::VecDeque;
use std::io::{Read, Write};

use gatecal_parser::{Decision, DecisionRecord, SourceLoc};

/// Decisions per gzip block of the window.
const BLOCK: usize = 512;

/// One sealed block of the window.
struct Block {
    gz: Vec<u8>,
    /// Latest decision time in the block.
    max_ts: f64,
    n: usize,
}

/// The decisions of the last `window_s` seconds of log time (up to the
/// latest decision read), as gzip-compressed decision records (version 2:
/// with the gate as analysed and the config in force, so that read back
/// they give the report they would have given read from the log).
pub struct Window {
    pub(super) window_s: f64,
    blocks: VecDeque<Block>,
    open: Vec<u8>,
    open_n: usize,
    open_max: f64,
    /// Latest decision time read.
    latest: f64,
    /// Decisions read in all.
    read: u64,
}

impl Window {
    /// An empty window `window_s` seconds long.
    pub fn new(window_s: f64) -> Window {
        Window {
            window_s,
            blocks: VecDeque::new(),
            open: Vec::new(),
            open_n: 0,
            open_max: f64::NEG_INFINITY,
            latest: f64::NEG_INFINITY,
            read: 0,
        }
    }

    /// Adds a decision record (one without a time takes the latest time
    /// read).
    pub fn push(&mut self, mut r: DecisionRecord) {
        self.read += 1;
        let ts = match r.ts.filter(|t| t.is_finite()) {
            Some(t) => t,
            None if self.latest.is_finite() => {
                r.ts = Some(self.latest);
                self.latest
            }
            None => 0.0,
        };
        if serde_json::to_writer(&mut self.open, &r).is_err() {
            return;
        }
        self.open.push(b'\n');
        self.open_n += 1;
        self.open_max = self.open_max.max(ts);
        self.latest = self.latest.max(ts);
        if self.open_n >= BLOCK {
            self.seal();
        }
        self.expire();
    }

    fn seal(&mut self) {
        if self.open_n == 0 {
            return;
        }
        // zlib's default level: a quarter smaller than its fastest on
        // decision records (62 bytes a record against 82), at a cost that
        // does not matter at a live log's pace.
        let mut e = flate2::write::GzEncoder::new(
            Vec::with_capacity(self.open.len() / 8),
            flate2::Compression::default(),
        );
        let mut gz = e
            .write_all(&self.open)
            .and_then(|()| e.finish())
            .unwrap_or_default();
        // Held for the whole window: no room left over.
        gz.shrink_to_fit();
        self.blocks.push_back(Block {
            gz,
            max_ts: self.open_max,
            n: self.open_n,
        });
        self.open.clear();
        self.open.shrink_to(BLOCK * 2048);
        self.open_n = 0;
        self.open_max = f64::NEG_INFINITY;
    }

    /// Drops the blocks wholly before the window.
    fn expire(&mut self) {
        let cut = self.start();
        while self.blocks.front().is_some_and(|b| b.max_ts < cut) {
            self.blocks.pop_front();
        }
    }

    /// The window's start: `window_s` before the latest decision.
    pub fn start(&self) -> f64 {
        self.latest - self.window_s
    }

    /// The latest decision's time, if any was read.
    pub fn latest(&self) -> Option<f64> {
        self.latest.is_finite().then_some(self.latest)
    }

    /// Decisions read in all.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Decisions held (some of the oldest block may be before the window).
    pub fn held(&self) -> usize {
        self.blocks.iter().map(|b| b.n).sum::<usize>() + self.open_n
    }

    /// Bytes held: the compressed blocks and the open one.
    pub fn bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.gz.capacity()).sum::<usize>() + self.open.capacity()
    }

    /// The decisions in the window (time at or after [`Window::start`]),
    /// in the order read, each located at `NAME:N` (its rank).
    pub fn decisions(&self, name: &str) -> Vec<Decision> {
        let mut out = Vec::new();
        self.for_each(name, |d| out.push(d));
        out
    }

    /// Calls `f` with each decision of the window, in the order read,
    /// one block decompressed at a time (the window's decisions are never
    /// all held decoded at once).
    pub fn for_each(&self, name: &str, mut f: impl FnMut(Decision)) {
        let cut = self.start();
        let mut rank = 0u64;
        self.each_line(|line| {
            let Ok(r) = DecisionRecord::parse_line(line) else {
                return;
            };
            if r.ts.is_some_and(|t| t < cut) {
                return;
            }
            rank += 1;
            f(r.into_decision(SourceLoc {
                file: name.into(),
                line: rank,
            }));
        });
    }
}

impl Window {
    /// Calls `f` with each decision of the window in the order a reorder
    /// buffer of `reorder_s` seconds would release them
    /// ([`gatecal_analysis::release_order`]), each located at `NAME:N`
    /// (its rank in the order read): the decisions of [`Window::for_each`]
    /// as an analysis given them one by one takes them. The order is
    /// worked out from the decisions' times alone, and the window is then
    /// read again, so that only the decisions read before their turn are
    /// held decoded (none while the window is in time order), not the
    /// buffer's `reorder_s` seconds of them.
    pub fn for_each_released(&self, reorder_s: f64, name: &str, mut f: impl FnMut(Decision)) {
        let cut = self.start();
        // The lines taken (as [`Window::for_each`] takes them), by their
        // time: `NaN` for none (a buffer releases both at once).
        let time = |line: &[u8]| -> Option<f64> {
            let ts = record_time(line)?;
            (!ts.is_some_and(|t| t < cut)).then(|| ts.unwrap_or(f64::NAN))
        };
        let mut times = Vec::new();
        self.each_line(|line| times.extend(time(line)));
        let order = gatecal_analysis::release_order(times.iter().map(|t| Some(*t)), reorder_s);
        drop(times);
        let mut next = 0usize;
        // Records read before their turn, by their rank among the lines
        // taken: as read (a line is smaller than the decision made of it),
        // with their rank among the records; `None` for a line that is not
        // a record after all (skipped when its turn comes).
        let mut early: std::collections::HashMap<u32, Option<(Vec<u8>, u64)>> =
            std::collections::HashMap::new();
        let decision = |line: &[u8], rank: u64| {
            DecisionRecord::parse_line(line).ok().map(|r| {
                r.into_decision(SourceLoc {
                    file: name.into(),
                    line: rank,
                })
            })
        };
        let mut rank = 0u64;
        let mut taken = 0u32;
        self.each_line(|line| {
            if time(line).is_none() {
                return;
            }
            let here = taken;
            taken += 1;
            match decision(line, rank + 1) {
                None => {
                    early.insert(here, None);
                }
                Some(d) => {
                    rank += 1;
                    if order.get(next) == Some(&here) {
                        next += 1;
                        f(d);
                    } else {
                        early.insert(here, Some((line.to_vec(), rank)));
                    }
                }
            }
            // Every record read whose turn has come, in turn.
            while let Some(k) = order.get(next) {
                let Some(held) = early.remove(k) else {
                    break;
                };
                next += 1;
                if let Some(d) = held.and_then(|(line, rank)| decision(&line, rank)) {
                    f(d);
                }
            }
        });
    }

    /// Calls `f` with each line of the window's blocks (those wholly
    /// before the window left out) and of the open block, in the order
    /// read, one block decompressed at a time.
    fn each_line(&self, mut f: impl FnMut(&[u8])) {
        let cut = self.start();
        let mut take = |text: &[u8]| {
            for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                f(line);
            }
        };
        let mut text = Vec::new();
        for b in &self.blocks {
            if b.max_ts < cut {
                continue;
            }
            text.clear();
            if flate2::read::GzDecoder::new(&b.gz[..])
                .read_to_end(&mut text)
                .is_ok()
            {
                take(&text);
            }
        }
        take(&self.open);
    }
}

/// The time of a window's record (`None` inside when it has none), or
/// `None` when the line is not a valid record: read from the start of the
/// line as [`Window::push`] writes it (`{"v":3,"ts":...`), else from the
/// whole record.
fn record_time(line: &[u8]) -> Option<Option<f64>> {
    // The prefix is the version written.
    const _: () = assert!(gatecal_parser::RECORD_VERSION == 3);
    let quick = line.strip_prefix(b"{\"v\":3,\"ts\":").and_then(|rest| {
        let end = rest.iter().position(|&b| b == b',')?;
        let text = std::str::from_utf8(&rest[..end]).ok()?;
        match text {
            "null" => Some(None),
            t => t.parse::<f64>().ok().filter(|t| t.is_finite()).map(Some),
        }
    });
    // A line the quick look takes is checked in full when read again.
    quick.or_else(|| DecisionRecord::parse_line(line).ok().map(|r| r.ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(ts: f64, id: u64) -> DecisionRecord {
        DecisionRecord::from(&Decision {
            deployment: "d".into(),
            ts: Some(ts),
            request_id: Some(format!("r{id}").into()),
            ..Decision::default()
        })
    }

    #[test]
    fn the_window_keeps_the_last_span_and_drops_older_blocks() {
        let mut w = Window::new(60.0);
        // One hour at 10 decisions a second.
        for i in 0..36_000u64 {
            w.push(decision(1_000.0 + i as f64 / 10.0, i));
        }
        let ds = w.decisions("w");
        // Decisions at or after latest - 60 s: 601 of them.
        assert_eq!(ds.len(), 601);
        assert_eq!(ds[0].request_id.as_deref(), Some("r35399"));
        assert_eq!(ds.last().unwrap().request_id.as_deref(), Some("r35999"));
        // Held: the window and at most one block before it.
        assert!(w.held() <= 601 + 2 * BLOCK, "{}", w.held());
        assert_eq!(w.read(), 36_000);
        assert!(w.bytes() < 2 << 20, "{}", w.bytes());
    }

    #[test]
    fn the_window_read_in_release_order_is_the_buffers_order() {
        let mut w = Window::new(600.0);
        // Two hours, every decision 0 to 45 s late, some more than the
        // 30 s buffer: the window starts mid-block.
        for i in 0..4_000u64 {
            let late = [0.0, 2.0, 45.0, 31.0, 7.0][i as usize % 5];
            w.push(decision(1_000.0 + i as f64 * 1.8 - late, i));
        }
        let read = w.decisions("w");
        let want: Vec<_> = gatecal_analysis::release_order(read.iter().map(|d| d.ts), 30.0)
            .into_iter()
            .map(|k| read[k as usize].clone())
            .collect();
        let mut got = Vec::new();
        w.for_each_released(30.0, "w", |d| got.push(d));
        assert!(want.len() > 300 && want.len() < 4_000, "{}", want.len());
        assert_eq!(got, want);
        assert_ne!(got, read);
    }

    /// Kept as numbers and names, every line comes back as read: the
    /// demo's vLLM logs (v1 lines with every field), and lines with
    /// optional numbers absent and odd names; names of lines gone are
    /// dropped.
    #[test]
    fn a_decision_without_time_takes_the_latest() {
        let mut w = Window::new(10.0);
        w.push(decision(100.0, 1));
        let mut d = decision(0.0, 2);
        d.ts = None;
        w.push(d);
        let ds = w.decisions("w");
        assert_eq!(ds.len(), 2);
        assert_eq!(ds[1].ts, Some(100.0));
    }
}
