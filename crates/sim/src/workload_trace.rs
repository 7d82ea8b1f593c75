//! Request traces in the Mooncake (FAST'25) JSON-lines format, replayed as
//! a deployment's open-loop arrivals.
//!
//! One JSON object a line: `timestamp` (arrival, ms from the start of the
//! trace), `input_length` and `output_length` (tokens) and `hash_ids`, one
//! id per [`TRACE_BLOCK_TOKENS`]-token block of the prompt; two requests
//! whose lists start with the same ids share that prefix.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

/// Tokens per block of a trace's `hash_ids`.
pub const TRACE_BLOCK_TOKENS: i64 = 512;

/// One request of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRequest {
    /// Arrival, ms from the start of the trace.
    pub timestamp_ms: f64,
    /// Prompt tokens.
    pub input_tokens: i64,
    /// Output tokens.
    pub output_tokens: i64,
    /// One id per 512-token block of the prompt (the last block may be
    /// partial); equal leading ids are a shared prefix.
    pub hash_ids: Vec<u64>,
}

/// A trace line that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// The file (as given).
    pub file: String,
    /// 1-based line number; 0 when the file itself could not be read.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for TraceError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine {
    timestamp: f64,
    input_length: i64,
    output_length: i64,
    hash_ids: Vec<u64>,
}

/// Reads a trace file (see [`parse_trace`]).
pub fn read_trace(path: &Path) -> Result<Vec<TraceRequest>, TraceError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| TraceError {
        file: file.clone(),
        line: 0,
        message: e.to_string(),
    })?;
    parse_trace(&file, &bytes)
}

/// Parses a trace: one JSON object a line, empty lines skipped, in
/// non-decreasing `timestamp` order. Every other line is an error naming
/// the file and line: not UTF-8 or not JSON, a missing or unknown key, a
/// negative or non-finite `timestamp`, a timestamp before the previous
/// line's, `input_length < 1`, `output_length < 0`, or more `hash_ids` than
/// the prompt has 512-token blocks (fewer are allowed: the blocks not listed
/// are shared with no other request).
///
/// ```
/// use gatecal_sim::parse_trace;
/// let t = parse_trace("t.jsonl", br#"{"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]}"#).unwrap();
/// assert_eq!(t[0].hash_ids, vec![7, 8]);
/// let e = parse_trace("t.jsonl", b"\n{\"timestamp\": 1}\n").unwrap_err();
/// assert!(e.to_string().starts_with("t.jsonl:2: "));
/// ```
pub fn parse_trace(file: &str, bytes: &[u8]) -> Result<Vec<TraceRequest>, TraceError> {
    let mut out = Vec::new();
    let mut last_ts = 0.0f64;
    for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let err = |message: String| TraceError {
            file: file.to_string(),
            line,
            message,
        };
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let text = std::str::from_utf8(raw).map_err(|_| err("not UTF-8".to_string()))?;
        let r: RawLine = serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
        if !(r.timestamp.is_finite() && r.timestamp >= 0.0) {
            return Err(err(format!(
                "timestamp must be a non-negative number of ms, got {}",
                r.timestamp
            )));
        }
        if r.timestamp < last_ts {
            return Err(err(format!(
                "timestamp {} is before the previous line's {last_ts}",
                r.timestamp
            )));
        }
        if r.input_length < 1 {
            return Err(err(format!(
                "input_length must be at least 1, got {}",
                r.input_length
            )));
        }
        if r.output_length < 0 {
            return Err(err(format!(
                "output_length must be at least 0, got {}",
                r.output_length
            )));
        }
        let blocks = (r.input_length + TRACE_BLOCK_TOKENS - 1) / TRACE_BLOCK_TOKENS;
        if r.hash_ids.len() as i64 > blocks {
            return Err(err(format!(
                "{} hash_ids for {} input tokens ({blocks} blocks of {TRACE_BLOCK_TOKENS})",
                r.hash_ids.len(),
                r.input_length
            )));
        }
        last_ts = r.timestamp;
        out.push(TraceRequest {
            timestamp_ms: r.timestamp,
            input_tokens: r.input_length,
            output_tokens: r.output_length,
            hash_ids: r.hash_ids,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_and_names_bad_ones() {
        let ok = b"{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 2, \"hash_ids\": [1, 2]}\r\n\n{\"timestamp\": 3.5, \"input_length\": 10, \"output_length\": 0, \"hash_ids\": []}\n";
        let t = parse_trace("a", ok).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].timestamp_ms, 3.5);
        let cases: [(&[u8], &str); 7] = [
            (b"{\"timestamp\": 7, \"input_length\": 1, \"output_length\": 1}", "hash_ids"),
            (b"not json", "expected"),
            (b"\xff", "not UTF-8"),
            (b"{\"timestamp\": -1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": []}", "non-negative"),
            (b"{\"timestamp\": 7, \"input_length\": 0, \"output_length\": 1, \"hash_ids\": []}", "input_length"),
            (b"{\"timestamp\": 7, \"input_length\": 512, \"output_length\": 1, \"hash_ids\": [1, 2]}", "2 hash_ids for 512"),
            (b"{\"timestamp\": 7, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [], \"x\": 1}", "unknown field"),
        ];
        for (bad, want) in cases {
            let mut text = ok.to_vec();
            text.extend_from_slice(bad);
            let e = parse_trace("w.jsonl", &text).unwrap_err();
            assert_eq!(e.line, 4, "{e}");
            assert!(e.to_string().starts_with("w.jsonl:4: "), "{e}");
            assert!(e.message.contains(want), "{e}");
        }
        let back = b"{\"timestamp\": 9, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": []}\n{\"timestamp\": 8, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": []}";
        let e = parse_trace("b", back).unwrap_err();
        assert_eq!((e.line, e.message.contains("before")), (2, true));
    }
}
