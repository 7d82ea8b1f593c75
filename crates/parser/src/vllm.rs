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
    /// A second stats record on the same line, after this one: two
    /// records whose newline was lost (two writers on one stream). Both
    /// are read; the parser emits this one after its line's first.
    #[serde(skip)]
    pub glued: Option<Box<VllmStats>>,
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
/// `(APIServer pid=1) `-style or other short prefix, or after a `[` (a
/// record pasted as `[INFO 08-21 14:36:14 loggers.py:123] …`).
pub(crate) fn find_header(line: &[u8]) -> Option<VllmHeader<'_>> {
    if let Some(h) = header_at(line, 0) {
        return Some(h);
    }
    // Any short prefix (VLLM_LOGGING_PREFIX, `(EngineCore_0 pid=7) `) up to 120 bytes.
    let lim = line.len().min(120);
    for p in 1..lim {
        if matches!(line[p - 1], b' ' | b'[')
            && matches!(line[p], b'I' | b'D' | b'W' | b'E' | b'C')
            && let Some(h) = header_at(line, p)
        {
            return Some(h);
        }
    }
    None
}

/// Where a second vLLM record starts within a record's body, when two
/// records share a line (`…Prefix cache hit rate: 0.0%INFO 08-21 14:36:24
/// [loggers.py:123] Engine 000: …`): the offset of the second record's
/// prefix (its `(APIServer pid=1) `-style tag included), and the offset of
/// its body.
pub(crate) fn find_glued(body: &[u8]) -> Option<(usize, usize)> {
    let mut first: Option<(usize, usize)> = None;
    for lvl in LEVELS {
        let mut from = 1;
        while let Some(i) = body.get(from..).and_then(|b| memchr::memmem::find(b, lvl)) {
            let at = from + i;
            if first.is_some_and(|(f, _)| f <= at) {
                break;
            }
            if let Some(h) = header_at(body, at) {
                first = Some((at, h.body));
                break;
            }
            from = at + 1;
        }
    }
    let (mut at, body_at) = first?;
    // The second record's own tag, `(APIServer pid=1) `, belongs to it.
    let before = &body[..at];
    if before.ends_with(b") ")
        && let Some(open) = memchr::memrchr(b'(', before)
        && memchr::memmem::find(&before[open..], b"pid=").is_some()
    {
        at = open;
    }
    Some((at, body_at))
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

/// Why a stats body was not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadStats {
    /// The prompt throughput does not parse.
    Unparsable,
    /// The last field stops short of its value's unit (`Waiting: 5 re`,
    /// `GPU KV cache us`, a trailing `,`): the line was cut mid-field.
    Cut,
}

/// The unit a known field's value ends with.
#[derive(Clone, Copy)]
enum Unit {
    /// `N tokens/s`.
    TokensPerSecond,
    /// `N reqs`.
    Requests,
    /// `N`, or `N reqs`.
    Count,
    /// `N%`.
    Percent,
}

fn unit_of(key: &str) -> Option<Unit> {
    Some(match key {
        "Avg prompt throughput" | "Avg generation throughput" => Unit::TokensPerSecond,
        "Running" | "Swapped" | "Pending" | "Waiting" => Unit::Requests,
        "Deferred" | "Preemptions" => Unit::Count,
        "GPU KV cache usage"
        | "CPU KV cache usage"
        | "Prefix cache hit rate"
        | "External prefix cache hit rate"
        | "MM cache hit rate" => Unit::Percent,
        _ => return None,
    })
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.parse::<f64>().is_ok()
}

fn is_count(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

/// Whether a known field's value is whole: its number and its unit.
fn whole(v: &str, unit: Unit) -> bool {
    let v = v.trim_end();
    match unit {
        Unit::TokensPerSecond => v.strip_suffix(" tokens/s").is_some_and(is_number),
        Unit::Requests => v.strip_suffix(" reqs").is_some_and(is_count),
        Unit::Count => is_count(v.strip_suffix(" reqs").unwrap_or(v)),
        Unit::Percent => v
            .strip_suffix('.')
            .unwrap_or(v)
            .strip_suffix('%')
            .is_some_and(is_number),
    }
}

/// Whether the last field of a stats body is whole (see [`BadStats::Cut`]).
/// An unknown last field passes when it has a value.
fn ends_whole(body: &str) -> bool {
    let body = body.trim_end();
    if body.ends_with(',') || body.ends_with(':') {
        return false;
    }
    let last = body.rsplit(", ").next().unwrap_or(body);
    match last.split_once(": ") {
        Some((k, v)) => match unit_of(k.trim()) {
            Some(unit) => whole(v, unit),
            None => !v.trim().is_empty(),
        },
        None => false,
    }
}

/// Parses the stats body (the text after the record prefix). `Err` when
/// the line names the stats but its numbers do not parse, or it was cut
/// mid-field.
pub(crate) fn parse_stats_body(body: &str) -> Result<VllmStats, BadStats> {
    let st = parse_fields(body).map_err(|()| BadStats::Unparsable)?;
    if ends_whole(body) {
        Ok(st)
    } else {
        Err(BadStats::Cut)
    }
}

fn parse_fields(body: &str) -> Result<VllmStats, ()> {
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
    fn a_line_cut_mid_field_is_refused() {
        let whole = "Engine 000: Avg prompt throughput: 8192.0 tokens/s, Avg generation throughput: 12.0 tokens/s, Running: 2 reqs, Waiting: 5 reqs, GPU KV cache usage: 40.1%, Prefix cache hit rate: 45.6%";
        assert!(parse_stats_body(whole).is_ok());
        let v0 = "Avg prompt throughput: 1.0 tokens/s, Running: 3 reqs, Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 12.3%, CPU KV cache usage: 0.0%.";
        assert!(parse_stats_body(v0).is_ok());
        let later = "Engine 000: Avg prompt throughput: 1.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, Preemptions: 0, GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%, MM cache hit rate: 0.0%";
        assert!(parse_stats_body(later).is_ok());
        // Every cut of the whole line inside its last four fields.
        let from = whole.find("Running").unwrap();
        for end in from..whole.len() {
            let cut = &whole[..end];
            if whole[end..].starts_with(", ") {
                continue;
            }
            assert_eq!(parse_stats_body(cut).err(), Some(BadStats::Cut), "{cut:?}");
        }
        assert_eq!(
            parse_stats_body("Avg prompt throughput: x tokens/s").err(),
            Some(BadStats::Unparsable)
        );
    }

    #[test]
    fn glued_records_are_found_with_their_tag() {
        let a = "Engine 000: Avg prompt throughput: 1.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%";
        let b =
            "INFO 08-21 14:36:24 [loggers.py:123] Engine 000: Avg prompt throughput: 2.0 tokens/s";
        let line = format!("{a}{b}");
        let (at, body) = find_glued(line.as_bytes()).unwrap();
        assert_eq!(at, a.len());
        assert_eq!(
            &line[body..],
            "Engine 000: Avg prompt throughput: 2.0 tokens/s"
        );
        let tagged = format!("{a}(APIServer pid=1) {b}");
        assert_eq!(find_glued(tagged.as_bytes()).unwrap().0, a.len());
        assert!(find_glued(a.as_bytes()).is_none());
    }

    #[test]
    fn a_bracketed_record_is_found() {
        let l =
            b"[INFO 08-21 14:36:14 loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s";
        let h = find_header(l).unwrap();
        assert_eq!(
            &l[h.body..],
            b"Engine 000: Avg prompt throughput: 1.0 tokens/s"
        );
    }

    #[test]
    fn not_a_header() {
        assert!(find_header(b"INFO 13-21 14:36:14 x] y").is_none());
        assert!(find_header(b"hello").is_none());
        assert!(parse_stats_body("Avg prompt throughput: abc tokens/s").is_err());
    }
}
