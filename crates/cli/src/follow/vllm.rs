//! The vLLM stats lines of the last `--window` of log time.

use std::collections::VecDeque;

use gatecal_parser::{SourceLoc, VllmStats};

/// The vLLM stats lines of the last `window_s` seconds of their log time
/// (up to the latest line read), at most [`VllmWindow::MAX`] of them.
/// Each line is kept as its numbers, its strings (deployment, pod, input,
/// level, engine) as indexes into the window's names: a line holds no
/// allocation of its own, and [`VllmWindow::lines`] gives it back as
/// read.
pub struct VllmWindow {
    window_s: f64,
    /// Each line with its time: its own, else its month, day and time
    /// of day in the year of the decisions read (vLLM's own lines carry
    /// no year), else the latest time read.
    lines: VecDeque<Kept>,
    names: Names,
    latest: f64,
    read: u64,
}

/// The strings of the lines held, each once.
#[derive(Default)]
struct Names {
    ids: std::collections::HashMap<gatecal_parser::Name, u32>,
    names: Vec<gatecal_parser::Name>,
}

/// No string (an absent pod or engine).
const NO_NAME: u32 = u32::MAX;

impl Names {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        let a = gatecal_parser::Name::from(s);
        self.names.push(a.clone());
        self.ids.insert(a, i);
        i
    }

    fn opt(&mut self, s: Option<&str>) -> u32 {
        s.map_or(NO_NAME, |s| self.id(s))
    }

    fn get(&self, i: u32) -> &str {
        self.names.get(i as usize).map_or("", |a| a)
    }

    fn name(&self, i: u32) -> gatecal_parser::Name {
        self.names.get(i as usize).cloned().unwrap_or_default()
    }

    fn get_opt(&self, i: u32) -> Option<String> {
        (i != NO_NAME).then(|| self.get(i).to_string())
    }
}

/// One stats line of a [`VllmWindow`]: every field of its
/// [`VllmStats`], the optional numbers present where `present` has their
/// bit.
#[derive(Clone, Copy)]
struct Kept {
    /// Its time in the window.
    t: f64,
    deployment: u32,
    pod: u32,
    file: u32,
    level: u32,
    engine: u32,
    line: u64,
    ts: f64,
    prompt_throughput: f64,
    counts: [u64; 5],
    rates: [f64; 5],
    seconds_of_day: u32,
    month: u8,
    day: u8,
    v1: bool,
    /// Bit 0: `ts`; bits 1–5: `counts`; bits 6–10: `rates`.
    present: u16,
}

impl Kept {
    fn new(t: f64, s: &VllmStats, names: &mut Names) -> Kept {
        let counts = [s.running, s.waiting, s.swapped, s.deferred, s.preemptions];
        let rates = [
            s.generation_throughput,
            s.gpu_kv_cache_usage_pct,
            s.cpu_kv_cache_usage_pct,
            s.prefix_cache_hit_rate_pct,
            s.mm_cache_hit_rate_pct,
        ];
        let mut present = u16::from(s.ts.is_some());
        for (i, c) in counts.iter().enumerate() {
            present |= u16::from(c.is_some()) << (1 + i);
        }
        for (i, r) in rates.iter().enumerate() {
            present |= u16::from(r.is_some()) << (6 + i);
        }
        Kept {
            t,
            deployment: names.id(&s.deployment),
            pod: names.opt(s.pod.as_deref()),
            file: names.id(&s.source.file),
            level: names.id(&s.level),
            engine: names.opt(s.engine.as_deref()),
            line: s.source.line,
            ts: s.ts.unwrap_or_default(),
            prompt_throughput: s.prompt_throughput,
            counts: counts.map(Option::unwrap_or_default),
            rates: rates.map(Option::unwrap_or_default),
            seconds_of_day: s.seconds_of_day,
            month: s.month,
            day: s.day,
            v1: s.version == gatecal_parser::VllmStatsVersion::V1,
            present,
        }
    }

    fn stats(&self, names: &Names) -> VllmStats {
        let has = |bit: u16| self.present & (1 << bit) != 0;
        let count = |i: usize| has(1 + i as u16).then_some(self.counts[i]);
        let rate = |i: usize| has(6 + i as u16).then_some(self.rates[i]);
        VllmStats {
            deployment: names.get(self.deployment).to_string(),
            pod: names.get_opt(self.pod),
            source: SourceLoc {
                file: names.name(self.file),
                line: self.line,
            },
            ts: has(0).then_some(self.ts),
            month: self.month,
            day: self.day,
            seconds_of_day: self.seconds_of_day,
            level: names.get(self.level).to_string(),
            version: if self.v1 {
                gatecal_parser::VllmStatsVersion::V1
            } else {
                gatecal_parser::VllmStatsVersion::V0
            },
            engine: names.get_opt(self.engine),
            prompt_throughput: self.prompt_throughput,
            generation_throughput: rate(0),
            running: count(0),
            waiting: count(1),
            swapped: count(2),
            deferred: count(3),
            preemptions: count(4),
            gpu_kv_cache_usage_pct: rate(1),
            cpu_kv_cache_usage_pct: rate(2),
            prefix_cache_hit_rate_pct: rate(3),
            mm_cache_hit_rate_pct: rate(4),
            glued: None,
        }
    }
}

impl VllmWindow {
    /// Most lines held: 64 engines logging every 10 s for 4 hours; the
    /// oldest go first.
    pub const MAX: usize = 92_160;

    /// An empty window `window_s` seconds long.
    pub fn new(window_s: f64) -> VllmWindow {
        VllmWindow {
            window_s,
            lines: VecDeque::new(),
            names: Names::default(),
            latest: f64::NEG_INFINITY,
            read: 0,
        }
    }

    /// Adds a line; `decisions` is the latest decision time read, which
    /// gives the year of a line without one.
    pub fn push(&mut self, s: VllmStats, decisions: Option<f64>) {
        self.read += 1;
        let t =
            s.ts.filter(|t| t.is_finite())
                .or_else(|| dated(&s, decisions))
                .or(self.latest())
                .or(decisions)
                .unwrap_or(0.0);
        self.latest = self.latest.max(t);
        self.lines.push_back(Kept::new(t, &s, &mut self.names));
        let cut = self.latest - self.window_s;
        while self.lines.len() > Self::MAX || self.lines.front().is_some_and(|l| l.t < cut) {
            self.lines.pop_front();
        }
        // Names of lines gone (pods replaced, inputs rotated) are dropped
        // once they outnumber the lines held.
        if self.names.names.len() > 4 * self.lines.len() + 1024 {
            let old = std::mem::take(&mut self.names);
            for l in self.lines.iter_mut() {
                let mut move_name = |i: &mut u32| {
                    if *i != NO_NAME {
                        *i = self.names.id(old.get(*i));
                    }
                };
                move_name(&mut l.deployment);
                move_name(&mut l.pod);
                move_name(&mut l.file);
                move_name(&mut l.level);
                move_name(&mut l.engine);
            }
        }
    }

    /// The latest line's time, if any was read.
    pub fn latest(&self) -> Option<f64> {
        self.latest.is_finite().then_some(self.latest)
    }

    /// Lines read in all.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// The lines in the window, in the order read, each as read.
    pub fn lines(&self) -> impl Iterator<Item = VllmStats> + '_ {
        let cut = self.latest - self.window_s;
        self.lines
            .iter()
            .filter(move |l| l.t >= cut)
            .map(|l| l.stats(&self.names))
    }
}

/// A yearless vLLM line's time in the year of `near` (the year before
/// when that puts it more than half a year after `near`).
fn dated(s: &VllmStats, near: Option<f64>) -> Option<f64> {
    let near = near?;
    if s.month == 0 || s.day == 0 {
        return None;
    }
    let (year, _) = gatecal_parser::year_month_of(near);
    let t = gatecal_parser::epoch_of(year, s.month, s.day, s.seconds_of_day);
    Some(if t > near + 183.0 * 86_400.0 {
        gatecal_parser::epoch_of(year - 1, s.month, s.day, s.seconds_of_day)
    } else {
        t
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatecal_parser::ParseOptions;

    #[test]
    fn vllm_lines_come_back_as_read() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/demo/glm-like.vllm");
        let mut read = Vec::new();
        for f in std::fs::read_dir(&dir).unwrap() {
            let path = f.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            let name = path.to_string_lossy().to_string();
            let p = gatecal_parser::parse_slice(&name, &bytes, &ParseOptions::default()).unwrap();
            read.extend(p.vllm_stats().cloned());
        }
        assert!(read.len() > 500, "{}", read.len());
        read.push(VllmStats {
            deployment: "d\u{e9}".into(),
            pod: None,
            engine: Some(String::new()),
            ts: Some(1.5e9),
            running: Some(u64::MAX),
            waiting: Some(0),
            cpu_kv_cache_usage_pct: Some(-0.0),
            ..VllmStats::default()
        });
        // No larger than docs/performance.md says.
        assert!(std::mem::size_of::<Kept>() <= 144);
        let mut w = VllmWindow::new(f64::INFINITY);
        for s in &read {
            w.push(s.clone(), Some(1_787_320_800.0));
        }
        let back: Vec<VllmStats> = w.lines().collect();
        assert_eq!(back.len(), read.len());
        for (a, b) in back.iter().zip(&read) {
            assert_eq!(a, b);
            assert_eq!(
                a.cpu_kv_cache_usage_pct.map(f64::to_bits),
                b.cpu_kv_cache_usage_pct.map(f64::to_bits)
            );
        }
        // A window of 10 s over lines of ever new pods: the names held stay
        // about those of the lines held.
        let mut w = VllmWindow::new(10.0);
        for i in 0..20_000u32 {
            w.push(
                VllmStats {
                    pod: Some(format!("pod-{i}")),
                    ts: Some(f64::from(i)),
                    ..VllmStats::default()
                },
                None,
            );
        }
        assert!(
            w.names.names.len() < 4 * 11 + 1024 + 8,
            "{}",
            w.names.names.len()
        );
        let last: Vec<VllmStats> = w.lines().collect();
        assert_eq!(last.len(), 11);
        assert_eq!(last[10].pod.as_deref(), Some("pod-19999"));
    }

    #[test]
    fn vllm_lines_without_a_year_take_the_decisions_year_and_expire() {
        let line = |month, day, secs| VllmStats {
            month,
            day,
            seconds_of_day: secs,
            ..VllmStats::default()
        };
        // 2026-08-21 14:00:00 UTC.
        let near = Some(1_787_320_800.0);
        let mut w = VllmWindow::new(600.0);
        w.push(line(8, 21, 14 * 3600), near);
        assert_eq!(w.latest(), near);
        // Twenty minutes later: the first is out of the window.
        w.push(line(8, 21, 14 * 3600 + 1200), near);
        assert_eq!(w.lines().count(), 1);
        assert_eq!(w.read(), 2);
        // New Year's Eve read in January: the year before.
        let jan = gatecal_parser::epoch_of(2027, 1, 1, 60);
        assert_eq!(
            dated(&line(12, 31, 86_000), Some(jan)),
            Some(gatecal_parser::epoch_of(2026, 12, 31, 86_000))
        );
        assert_eq!(dated(&line(0, 0, 5), Some(jan)), None);
    }
}
