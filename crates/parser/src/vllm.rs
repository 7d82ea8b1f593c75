//! vLLM periodic stats lines (`Avg prompt throughput: ...`), v0 and v1.
//!
//! The vLLM record prefix (`INFO 08-21 14:36:14 [loggers.py:123] `) has no
//! year and no zone. The parser takes the time, in order, from the kubelet
//! `--timestamps` prefix (exact), else from the record's month, day and time
//! with the year of [`crate::ParseOptions::year`], else with the year of the
//! latest absolute timestamp seen earlier in the same input (a record month
//! later than that timestamp's month by more than six is put in the year
//! before), all read as UTC; else [`VllmStats::ts`] is `None` and only the
//! relative fields [`VllmStats::month`], [`VllmStats::day`] and
//! [`VllmStats::seconds_of_day`] are set.

use serde::Serialize;

use crate::decision::SourceLoc;

/// Which stats line wording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VllmStatsVersion {
    /// v0 (`vllm/engine/metrics.py`): `Swapped`, `Pending`, CPU KV cache.
    #[default]
    V0,
    /// v1 (`vllm/v1/metrics/loggers.py`): `Engine NNN: ` prefix, `Waiting`,
    /// prefix cache hit rate.
    V1,
}

/// One vLLM stats record.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VllmStats {
    /// The deployment of the input (see the crate docs).
    pub deployment: String,
    /// The vLLM pod: the kubectl prefix's pod, else the input's `NAME=`,
    /// else the input file's stem.
    pub pod: Option<String>,
    /// Where the line is.
    pub source: SourceLoc,
    /// Epoch seconds, when the year is known (see the module docs).
    pub ts: Option<f64>,
    /// Month of the record prefix, 1-12 (0 when absent).
    pub month: u8,
    /// Day of the record prefix, 1-31 (0 when absent).
    pub day: u8,
    /// Seconds since midnight of the record prefix.
    pub seconds_of_day: u32,
    /// `INFO` or `DEBUG` (idle engines log at DEBUG).
    pub level: String,
    /// Which wording.
    pub version: VllmStatsVersion,
    /// The engine: `000` of `Engine 000: `, or `N Engines Aggregated`;
    /// `None` for v0.
    pub engine: Option<String>,
    /// `Avg prompt throughput`, tokens/s. In v1 this counts the full prompt,
    /// cached tokens included, in the step that emits the first token.
    pub prompt_throughput: f64,
    /// `Avg generation throughput`, tokens/s.
    pub generation_throughput: Option<f64>,
    /// `Running` requests.
    pub running: Option<u64>,
    /// `Waiting` (v1) or `Pending` (v0) requests.
    pub waiting: Option<u64>,
    /// `Swapped` requests (v0).
    pub swapped: Option<u64>,
    /// `Deferred` requests (later v1).
    pub deferred: Option<u64>,
    /// `Preemptions` (later v1).
    pub preemptions: Option<u64>,
    /// `GPU KV cache usage`, percent.
    pub gpu_kv_cache_usage_pct: Option<f64>,
    /// `CPU KV cache usage`, percent (v0).
    pub cpu_kv_cache_usage_pct: Option<f64>,
    /// `Prefix cache hit rate`, percent (v1).
    pub prefix_cache_hit_rate_pct: Option<f64>,
    /// `MM cache hit rate`, percent (later v1).
    pub mm_cache_hit_rate_pct: Option<f64>,
}

const LEVELS: [&[u8]; 5] = [b"INFO ", b"DEBUG ", b"WARNING ", b"ERROR ", b"CRITICAL "];

/// The parsed vLLM record prefix: level, month, day, seconds of day, and the
/// offset of the text after the `] `.
pub(crate) struct VllmHeader<'a> {
    pub level: &'a [u8],
    pub month: u8,
    pub day: u8,
    pub secs: u32,
    pub body: usize,
}

fn digits2(b: &[u8]) -> Option<u32> {
    match b {
        [a, c] if a.is_ascii_digit() && c.is_ascii_digit() => {
            Some(u32::from(a - b'0') * 10 + u32::from(c - b'0'))
        }
        _ => None,
    }
}

/// Parses `LEVEL MM-DD HH:MM:SS ` at `at`.
fn header_at(line: &[u8], at: usize) -> Option<VllmHeader<'_>> {
    let rest = line.get(at..)?;
    let lvl = LEVELS.iter().find(|l| rest.starts_with(l))?;
    let d = rest.get(lvl.len()..lvl.len() + 15)?;
    // "08-21 14:36:14 "
    if d[2] != b'-' || d[5] != b' ' || d[8] != b':' || d[11] != b':' || d[14] != b' ' {
        return None;
    }
    let month = digits2(&d[0..2])?;
    let day = digits2(&d[3..5])?;
    let h = digits2(&d[6..8])?;
    let m = digits2(&d[9..11])?;
    let s = digits2(&d[12..14])?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let after = at + lvl.len() + 15;
    // `[loggers.py:123] ` (new) or `metrics.py:351] ` (old).
    let tail = &line[after..];
    let close = memchr::memmem::find(tail, b"] ")?;
    if close > 200 {
        return None;
    }
    Some(VllmHeader {
        level: &lvl[..lvl.len() - 1],
        month: month as u8,
        day: day as u8,
        secs: h * 3600 + m * 60 + s,
        body: after + close + 2,
    })
}

/// Finds a vLLM record prefix at the start of the line, or after a
/// `(APIServer pid=1) `-style or other short prefix.
pub(crate) fn find_header(line: &[u8]) -> Option<VllmHeader<'_>> {
    if let Some(h) = header_at(line, 0) {
        return Some(h);
    }
    // Any short prefix (VLLM_LOGGING_PREFIX, `(EngineCore_0 pid=7) `) up to 120 bytes.
    let lim = line.len().min(120);
    for p in 1..lim {
        if line[p - 1] == b' '
            && matches!(line[p], b'I' | b'D' | b'W' | b'E' | b'C')
            && let Some(h) = header_at(line, p)
        {
            return Some(h);
        }
    }
    None
}

fn num(s: &str) -> Option<f64> {
    let t = s.trim().trim_end_matches('.').trim_end_matches('%');
    let t = t.split(' ').next()?;
    let v: f64 = t.parse().ok()?;
    if v.is_finite() { Some(v) } else { None }
}

fn count(s: &str) -> Option<u64> {
    let v = num(s)?;
    if v >= 0.0 && v.fract() == 0.0 && v < 1e18 {
        Some(v as u64)
    } else {
        None
    }
}

/// Parses the stats body (the text after the record prefix). `Err(())` when
/// the line names the stats but its numbers do not parse.
pub(crate) fn parse_stats_body(body: &str) -> Result<VllmStats, ()> {
    let Some(at) = body.find("Avg prompt throughput: ") else {
        return Err(());
    };
    let pre = body[..at].trim_end();
    let mut st = VllmStats::default();
    if let Some(e) = pre.strip_suffix(':') {
        let e = e.trim();
        st.version = VllmStatsVersion::V1;
        st.engine = Some(e.strip_prefix("Engine ").unwrap_or(e).to_string());
    }
    let mut saw_prompt = false;
    for part in body[at..].split(", ") {
        let Some((k, v)) = part.split_once(": ") else {
            continue;
        };
        match k.trim() {
            "Avg prompt throughput" => {
                st.prompt_throughput = num(v).ok_or(())?;
                saw_prompt = true;
            }
            "Avg generation throughput" => st.generation_throughput = num(v),
            "Running" => st.running = count(v),
            "Swapped" => st.swapped = count(v),
            "Pending" => st.waiting = count(v),
            "Waiting" => {
                st.waiting = count(v);
                st.version = VllmStatsVersion::V1;
            }
            "Deferred" => st.deferred = count(v),
            "Preemptions" => st.preemptions = count(v),
            "GPU KV cache usage" => st.gpu_kv_cache_usage_pct = num(v),
            "CPU KV cache usage" => st.cpu_kv_cache_usage_pct = num(v),
            "Prefix cache hit rate" => {
                st.prefix_cache_hit_rate_pct = num(v);
                st.version = VllmStatsVersion::V1;
            }
            "MM cache hit rate" => st.mm_cache_hit_rate_pct = num(v),
            _ => {}
        }
    }
    if saw_prompt { Ok(st) } else { Err(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v0_line() {
        let l = b"INFO 08-21 14:36:14 metrics.py:351] Avg prompt throughput: 1234.5 tokens/s, Avg generation throughput: 56.7 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 12.3%, CPU KV cache usage: 0.0%.";
        let h = find_header(l).unwrap();
        assert_eq!((h.month, h.day, h.secs), (8, 21, 14 * 3600 + 36 * 60 + 14));
        let st = parse_stats_body(std::str::from_utf8(&l[h.body..]).unwrap()).unwrap();
        assert_eq!(st.version, VllmStatsVersion::V0);
        assert_eq!(st.prompt_throughput, 1234.5);
        assert_eq!(st.running, Some(3));
        assert_eq!(st.waiting, Some(1));
        assert_eq!(st.swapped, Some(0));
        assert_eq!(st.cpu_kv_cache_usage_pct, Some(0.0));
        assert_eq!(st.engine, None);
    }

    #[test]
    fn v1_line_with_prefix() {
        let l = b"(APIServer pid=1) INFO 08-21 14:36:14 [loggers.py:123] Engine 000: Avg prompt throughput: 8192.0 tokens/s, Avg generation throughput: 12.0 tokens/s, Running: 2 reqs, Waiting: 5 reqs, Preemptions: 0, GPU KV cache usage: 40.1%, Prefix cache hit rate: 45.6%, MM cache hit rate: 0.0%";
        let h = find_header(l).unwrap();
        assert_eq!(h.level, b"INFO");
        let st = parse_stats_body(std::str::from_utf8(&l[h.body..]).unwrap()).unwrap();
        assert_eq!(st.version, VllmStatsVersion::V1);
        assert_eq!(st.engine.as_deref(), Some("000"));
        assert_eq!(st.waiting, Some(5));
        assert_eq!(st.preemptions, Some(0));
        assert_eq!(st.prefix_cache_hit_rate_pct, Some(45.6));
        assert_eq!(st.mm_cache_hit_rate_pct, Some(0.0));
    }

    #[test]
    fn aggregated_engines_and_error_level() {
        let l = b"ERROR 01-02 00:00:01 [loggers.py:9] 2 Engines Aggregated: Avg prompt throughput: 1.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs";
        let h = find_header(l).unwrap();
        assert_eq!(h.level, b"ERROR");
        let st = parse_stats_body(std::str::from_utf8(&l[h.body..]).unwrap()).unwrap();
        assert_eq!(st.engine.as_deref(), Some("2 Engines Aggregated"));
    }

    #[test]
    fn not_a_header() {
        assert!(find_header(b"INFO 13-21 14:36:14 x] y").is_none());
        assert!(find_header(b"hello").is_none());
        assert!(parse_stats_body("Avg prompt throughput: abc tokens/s").is_err());
    }
}
