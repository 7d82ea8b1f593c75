//! What the fuzz targets share: the checks every parse must pass, the
//! whole pipeline (parse, analysis, every renderer), and a structure-aware
//! mutation of real fixture lines (numeric fields replaced by values at
//! the edges of their domain).

use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, InputSummary, Recommend, RecommendOptions,
};
use gatecal_parser::{Item, ParseOptions, Parsed, parse_slice};
use gatecal_render::svg::{SvgHistogram, histogram_svg};
use gatecal_render::{Format, renderer};

/// Real lines of every shape the parser reads, from the fixtures.
pub const SEED_LOGS: &[&[u8]] = &[
    include_bytes!("../../fixtures/edge/all_filter_versions.log"),
    include_bytes!("../../fixtures/edge/pd_two_profiles.log"),
    include_bytes!("../../fixtures/edge/two_filter_instances.log"),
    include_bytes!("../../fixtures/edge/id_reuse_retry.log"),
    include_bytes!("../../fixtures/edge/kubectl_prefix_timestamps.log"),
    include_bytes!("../../fixtures/edge/endpoint_shapes.log"),
    include_bytes!("../../fixtures/edge/console_encoder.log"),
    include_bytes!("../../fixtures/edge/vllm_stats.log"),
    include_bytes!("../../fixtures/edge/nan_inf_strings.log"),
    include_bytes!("../../fixtures/edge/decisions.jsonl"),
];

/// The seed lines, split.
pub fn seed_lines() -> Vec<&'static [u8]> {
    SEED_LOGS
        .iter()
        .flat_map(|f| f.split(|&b| b == b'\n'))
        .filter(|l| !l.is_empty())
        .collect()
}

/// Values at the edges of a numeric field's domain.
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "-0",
    "1e400",
    "-1e400",
    "1.7976931348623157e308",
    "5e-324",
    "\"NaN\"",
    "\"+Inf\"",
    "\"-Inf\"",
    "NaN",
    "18446744073709551616",
    "9223372036854775807",
    "253402300799",
    "-62135596800",
    "0.5",
    "1e-9",
    "\"\"",
    "null",
    "true",
    "[]",
    "{}",
];

/// A small reader of fuzz bytes: each call takes the next byte (0 when
/// none are left).
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    /// The next byte.
    pub fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    /// The next two bytes as a number.
    pub fn u16(&mut self) -> u16 {
        u16::from(self.byte()) << 8 | u16::from(self.byte())
    }

    /// Whether bytes are left.
    pub fn more(&self) -> bool {
        !self.0.is_empty()
    }
}

/// The byte ranges of the numbers in a line (after a `:` or `,` or `[`,
/// as in JSON and console lines).
fn number_spans(line: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < line.len() {
        let starts = (line[i].is_ascii_digit() || line[i] == b'-')
            && i > 0
            && matches!(line[i - 1], b':' | b',' | b'[' | b' ');
        if starts {
            let s = i;
            i += 1;
            while i < line.len()
                && matches!(line[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
            {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

/// A line built from the fuzz bytes: a seed line, maybe with one number
/// replaced by an edge value, its request id changed, or cut.
pub fn mutated_line(seeds: &[&[u8]], b: &mut Bytes<'_>) -> Vec<u8> {
    let line = seeds[usize::from(b.u16()) % seeds.len()];
    let op = b.byte();
    match op % 6 {
        0 | 1 => {
            let spans = number_spans(line);
            if spans.is_empty() {
                return line.to_vec();
            }
            let (s, e) = spans[usize::from(b.byte()) % spans.len()];
            let v = NUMBERS[usize::from(b.byte()) % NUMBERS.len()];
            [&line[..s], v.as_bytes(), &line[e..]].concat()
        }
        2 => {
            // Another request id (few ids: requests interleave and reuse).
            let id = format!("\"x-request-id\":\"r{}\"", b.byte() % 4);
            replace_value(line, b"\"x-request-id\":", &id)
        }
        3 => {
            let cut = usize::from(b.u16()) % (line.len() + 1);
            line[..cut].to_vec()
        }
        _ => line.to_vec(),
    }
}

/// `line` with the JSON string value after `key` replaced by `with` (key
/// included).
fn replace_value(line: &[u8], key: &[u8], with: &str) -> Vec<u8> {
    let Some(at) = line.windows(key.len()).position(|w| w == key) else {
        return line.to_vec();
    };
    let v = at + key.len();
    if line.get(v) != Some(&b'"') {
        return line.to_vec();
    }
    let Some(end) = line[v + 1..].iter().position(|&c| c == b'"') else {
        return line.to_vec();
    };
    [&line[..at], with.as_bytes(), &line[v + 2 + end..]].concat()
}

/// The invariants of any parse: every line accounted for, every decision
/// counted.
pub fn check_parsed(p: &Parsed) {
    let c = &p.ledger.counts;
    assert!(c.balanced(), "ledger does not balance: {c:?}");
    let decisions = p
        .items
        .iter()
        .filter(|i| matches!(i, Item::Decision(_)))
        .count() as u64;
    assert_eq!(decisions, c.decisions, "decisions emitted vs counted");
    assert_eq!(
        c.decisions,
        c.decisions_complete + c.decisions_incomplete + c.decisions_evicted,
        "decisions by completion"
    );
}

/// Parses `bytes` with `opts`, checking the invariants.
pub fn parse(bytes: &[u8], opts: &ParseOptions) -> Option<Parsed> {
    let p = parse_slice("fuzz.log", bytes, opts).ok()?;
    check_parsed(&p);
    Some(p)
}

/// The whole pipeline on the parse: both analyses and every renderer.
pub fn analyse_and_render(p: &Parsed) {
    let input = InputSummary {
        inputs: vec!["fuzz.log".into()],
        lines_total: p.ledger.counts.lines_total,
        ..InputSummary::default()
    };
    let mut audit = GateDist::new(GateDistOptions::default(), ConfigSet::default());
    let mut rec = Recommend::new(RecommendOptions::default(), ConfigSet::default());
    for item in &p.items {
        match item {
            Item::Decision(d) => {
                audit.push(DecisionInput::from((**d).clone()));
                rec.push_decision(DecisionInput::from((**d).clone()));
            }
            Item::VllmStats(s) => rec.push_vllm(s),
        }
    }
    let report = audit.finish(input.clone());
    let recommend = rec.finish(input);
    for f in [Format::Table, Format::Markdown, Format::Json, Format::Csv] {
        let mut out = Vec::new();
        renderer(f)
            .gate_dist(&report, &mut out)
            .expect("render to memory");
        renderer(f)
            .recommend(&recommend, &mut out)
            .expect("render to memory");
    }
    for d in &report.deployments {
        let _ = histogram_svg(&SvgHistogram {
            title: &d.name,
            bins: &d.histogram,
            bar_ms: d.stats.bar_ms,
            pinned_min_ms: Some(5000.0),
            n: d.stats.gate_input_ms.count,
            note: None,
            log_scale: false,
        });
    }
}
