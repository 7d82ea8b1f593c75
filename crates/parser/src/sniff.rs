//! Which files found in a folder (or by a glob) are read: those whose
//! first lines show one of the input kinds in [`KINDS`]. A file named by
//! path is always read; this only keeps reports, charts, archives and
//! notes that sit beside the logs out of the parse.

use crate::frame::frame;

/// Bytes of a file's start (after gzip decompression) that are looked at.
pub(crate) const SNIFF_BYTES: usize = 64 << 10;

/// Lines of a file's start that are looked at.
const SNIFF_LINES: usize = 64;

/// Whether one line is of an input kind.
type LineTest = fn(&[u8]) -> bool;

/// The input kinds, each with its test of one line (capture prefixes off,
/// trailing whitespace trimmed). A file is read when one of its first
/// lines passes one test. A new input kind is one more row.
const KINDS: &[(&str, LineTest)] = &[
    ("EPP log lines", is_epp_line),
    ("vLLM log lines", is_vllm_line),
    ("decision records", crate::record::looks_like_record),
    // Traces: by the start of the file (see `sniff`), not line by line.
    ("OpenTelemetry traces", |_| false),
];

/// The name of the trace kind in [`KINDS`].
const TRACES: &str = "OpenTelemetry traces";

/// The kinds, for messages: `EPP log lines, vLLM log lines, decision records or OpenTelemetry traces`.
pub(crate) fn kinds_list() -> String {
    let names: Vec<&str> = KINDS.iter().map(|(n, _)| *n).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The kind of input `head` (a file's first bytes, decompressed) starts
/// with, if any. A last line cut by the end of `head` is looked at too.
/// Traces only when the file starts as a trace document (a line of
/// OTLP/JSON, or a pretty-printed response), as the parse reads them.
pub(crate) fn sniff(head: &[u8]) -> Option<&'static str> {
    if crate::trace::looks_like_traces(head) {
        return Some(TRACES);
    }
    if let Some(h) = crate::reframe::reframed_head(head, None) {
        return sniff_lines(&h);
    }
    sniff_lines(head)
}

/// [`sniff`] of lines in kubectl's framing.
fn sniff_lines(head: &[u8]) -> Option<&'static str> {
    head.split(|&c| c == b'\n')
        .take(SNIFF_LINES)
        .filter_map(|line| frame(line).ok())
        .map(|f| crate::classify::trim_end(f.body))
        .filter(|b| !b.is_empty())
        .find_map(|body| KINDS.iter().find(|(_, test)| test(body)).map(|(n, _)| *n))
}

/// A zap JSON line (`{"level":…,"ts":…,"msg":…}`) or a zap console line
/// (`TIME<TAB>LEVEL<TAB>…`).
fn is_epp_line(b: &[u8]) -> bool {
    if b.first() == Some(&b'{') {
        let has = |k: &[u8]| memchr::memmem::find(b, k).is_some();
        return has(b"\"msg\":") && (has(b"\"level\":") || has(b"\"ts\":"));
    }
    let mut parts = b.split(|&c| c == b'\t');
    let (Some(time), Some(level)) = (parts.next(), parts.next()) else {
        return false;
    };
    time.first().is_some_and(u8::is_ascii_digit)
        && crate::fields::level(level).is_some()
        && (crate::time::parse_rfc3339(time).is_some()
            || std::str::from_utf8(time)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .and_then(crate::fields::plausible_epoch)
                .is_some())
}

/// A vLLM log record (`INFO 08-21 14:36:14 [file.py:12] …`).
fn is_vllm_line(b: &[u8]) -> bool {
    crate::vllm::find_header(b).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let epp = br#"{"level":"info","ts":1755787000.1,"msg":"Starting"}"#;
        assert_eq!(sniff(epp), Some("EPP log lines"));
        let prefixed =
            b"[pod/epp-1/epp] 2026-02-10T08:15:02.1Z {\"level\":\"debug\",\"msg\":\"x\"}\n";
        assert_eq!(sniff(prefixed), Some("EPP log lines"));
        let console = b"2026-02-10T08:15:02Z\tINFO\tmain.go:1\tStarting\n";
        assert_eq!(sniff(console), Some("EPP log lines"));
        let vllm = b"INFO 08-21 14:36:14 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s\n";
        assert_eq!(sniff(vllm), Some("vLLM log lines"));
        // Blank lines and other lines before the first known one.
        let later = b"\n\nsome banner\n{\"level\":\"info\",\"msg\":\"x\"}\n";
        assert_eq!(sniff(later), Some("EPP log lines"));
        // Traces: a Collector file-exporter line, a pretty-printed response.
        let otlp = br#"{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[]}]}"#;
        assert_eq!(sniff(otlp), Some("OpenTelemetry traces"));
        let jaeger = b"{\n  \"data\": [\n    {\n";
        assert_eq!(sniff(jaeger), Some("OpenTelemetry traces"));
        // Only at the start: a JSON file whose fifth line opens `"data"`,
        // or a banner before a trace line, is not read as traces.
        let later = b"{\n  \"schema\": \"x\",\n  \"n\": 1,\n  \"m\": 2,\n  \"data\": [\n";
        assert_eq!(sniff(later), None);
        let banner = b"# exported\n{\"resourceSpans\":[]}\n";
        assert_eq!(sniff(banner), None);
    }

    #[test]
    fn not_inputs() {
        assert_eq!(sniff(b""), None);
        assert_eq!(sniff(b"# notes\nhello\n"), None);
        // A pretty-printed JSON report, an SVG, a CSV, a YAML config.
        assert_eq!(sniff(b"{\n  \"schema\": \"gatecal.gate-dist/v1\",\n"), None);
        assert_eq!(sniff(b"<svg xmlns=\"http://www.w3.org/2000/svg\">\n"), None);
        assert_eq!(sniff(b"section,deployment,key,value\n"), None);
        assert_eq!(sniff(b"apiVersion: v1\nkind: ConfigMap\n"), None);
        // One-line JSON that is not a zap line.
        assert_eq!(sniff(br#"{"a":1,"b":[2]}"#), None);
        assert_eq!(
            kinds_list(),
            "EPP log lines, vLLM log lines, decision records or OpenTelemetry traces"
        );
    }
}
