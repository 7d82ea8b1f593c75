//! The fuzz targets' entry points, one function per target ([`line()`],
//! [`assembler`], [`pipeline`], [`decisions`], [`config`]), and what they
//! share: the checks every parse must pass, the whole pipeline (parse,
//! analysis, every renderer), and a structure-aware mutation of real
//! fixture lines (numeric fields replaced by values at the edges of their
//! domain).
//!
//! The cargo-fuzz targets in `fuzz/` (nightly, libFuzzer) call these
//! functions; so does this crate's test (`tests/it/corpus.rs`, stable Rust,
//! part of `cargo test --workspace`), over each target's seeds and a few
//! thousand deterministic mutations of them, so that the harness cannot
//! rot and a regression a seed reaches fails the build. See
//! `docs/fuzzing.md`.

use std::sync::OnceLock;

use gatecal_analysis::{
    ConfigSet, DecisionInput, EppConfigError, GateDist, GateDistOptions, InputSummary,
    ParamChanges, Recommend, RecommendOptions, emit, filters_from_yaml, producer_block_sizes,
};
use gatecal_parser::{DecisionWriter, InputFormat};
use gatecal_parser::{Item, ParseOptions, Parsed, parse_slice};
use gatecal_render::svg::{SvgHistogram, histogram_svg};
use gatecal_render::{Format, renderer};

/// Real lines of every shape the parser reads, from the fixtures.
pub const SEED_LOGS: &[&[u8]] = &[
    include_bytes!("../../../fixtures/edge/all_filter_versions.log"),
    include_bytes!("../../../fixtures/edge/pd_two_profiles.log"),
    include_bytes!("../../../fixtures/edge/two_filter_instances.log"),
    include_bytes!("../../../fixtures/edge/id_reuse_retry.log"),
    include_bytes!("../../../fixtures/edge/kubectl_prefix_timestamps.log"),
    include_bytes!("../../../fixtures/edge/endpoint_shapes.log"),
    include_bytes!("../../../fixtures/edge/console_encoder.log"),
    include_bytes!("../../../fixtures/edge/vllm_stats.log"),
    include_bytes!("../../../fixtures/edge/nan_inf_strings.log"),
    include_bytes!("../../../fixtures/edge/decisions.jsonl"),
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

/// The fixture lines [`mutated_line`] picks from, split once.
fn seeds() -> &'static [&'static [u8]] {
    static S: OnceLock<Vec<&'static [u8]>> = OnceLock::new();
    S.get_or_init(seed_lines)
}

/// `line`: one line through the line parser (framing, classification,
/// fields), alone and behind the capture prefixes; at most one line
/// counted, the ledger balanced.
pub fn line(data: &[u8]) {
    let line = data.split(|&b| b == b'\n').next().unwrap_or_default();
    let opts = ParseOptions::default();
    if let Some(p) = parse(line, &opts) {
        assert!(p.ledger.counts.lines_total <= 1);
    }
    let framed = [
        b"[pod/epp-0/epp] 2026-02-10T08:15:02.123456789Z ".as_slice(),
        line,
    ]
    .concat();
    if let Some(p) = parse(&framed, &opts) {
        assert!(p.ledger.counts.lines_total <= 1);
    }
}

/// `assembler`: the assembler fed a sequence of real lines built from the
/// bytes (each step picks a fixture line and maybe replaces one number by
/// an edge value, changes its request id or cuts it), assembled with
/// tight bounds (few open requests, no idle age), so eviction, reuse and
/// retries are all reached; every line counted.
pub fn assembler(data: &[u8]) {
    let mut b = Bytes(data);
    let limits = b.byte();
    let mut log = Vec::new();
    let mut n = 0;
    while b.more() && n < 200 {
        log.extend(mutated_line(seeds(), &mut b));
        log.push(b'\n');
        n += 1;
    }
    let opts = ParseOptions {
        max_open_requests: usize::from(limits % 4) + 1,
        max_open_age_secs: if limits & 4 != 0 { 0.0 } else { 60.0 },
        infer_not_applicable: limits & 8 != 0,
        ..ParseOptions::default()
    };
    if let Some(p) = parse(&log, &opts) {
        assert_eq!(p.ledger.counts.lines_total, n as u64);
    }
}

/// `pipeline`: the whole pipeline on arbitrary bytes: the parse on one
/// thread and on two (with tiny blocks; the output must be the same),
/// then both analyses and every renderer.
pub fn pipeline(data: &[u8]) {
    let one = ParseOptions::default();
    let Some(p) = parse(data, &one) else {
        return;
    };
    let two = ParseOptions {
        threads: 2,
        block_bytes: 64,
        ..ParseOptions::default()
    };
    if let Some(q) = parse(data, &two) {
        // Compared as printed: a NaN the log holds is the same NaN on both
        // sides, though NaN != NaN.
        assert_eq!(
            format!("{:?}", p.items),
            format!("{:?}", q.items),
            "two threads read differently"
        );
        assert_eq!(
            p.ledger.counts, q.ledger.counts,
            "two threads count differently"
        );
    }
    analyse_and_render(&p);
}

/// `decisions`: arbitrary lines read as decision records; the decisions
/// read, written back as records, read again without a malformed line and
/// to as many decisions.
pub fn decisions(data: &[u8]) {
    let opts = ParseOptions {
        format: InputFormat::Decisions,
        ..ParseOptions::default()
    };
    let Some(p) = parse(data, &opts) else {
        return;
    };
    let mut w = DecisionWriter::new(Vec::new());
    for d in p.decisions() {
        w.write(d).expect("write to memory");
    }
    let again = w.into_inner().expect("write to memory");
    let q = parse(&again, &opts).expect("records written are read");
    assert_eq!(
        q.ledger.counts.lines_malformed, 0,
        "a written record is malformed"
    );
    assert_eq!(q.decisions().count(), p.decisions().count());
}

/// `config`: arbitrary text through the EPP config reader (an
/// EndpointPickerConfig, a ConfigMap or Helm values holding one) and its
/// other two uses: the producers' block sizes, and the file written back
/// with new parameters, which must read back as asked. Returns what the
/// filter read gave (`None` for bytes that are not UTF-8), so that a test
/// can check that a hostile seed is refused.
pub fn config(data: &[u8]) -> Option<Result<usize, EppConfigError>> {
    let text = std::str::from_utf8(data).ok()?;
    let read = filters_from_yaml(text);
    let _ = producer_block_sizes(text);
    if let Ok(filters) = &read {
        for (name, config) in filters {
            let _ = (name.len(), config.to_parameters());
        }
        let changes = ParamChanges {
            peak_prefill_throughput: 3000.0,
            max_ttft_penalty_ms: 1500.0,
            penalty_mode: gatecal_filter::PenaltyMode::Static,
        };
        if let Ok((out, names)) = emit(text, &changes, |_, _| true) {
            let back = filters_from_yaml(&out).expect("an emitted config reads back");
            assert!(!names.is_empty() && back.len() == filters.len());
        }
    }
    Some(read.map(|f| f.len()))
}
