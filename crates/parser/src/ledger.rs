//! The ledger: every input line accounted for.

use serde::Serialize;

use crate::decision::{Completion, SourceLoc};
use crate::{ParseError, ParseOptions};

/// Why a line was counted as malformed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MalformedReason {
    /// The line is longer than [`crate::ParseOptions::max_line_bytes`]; it was
    /// skipped up to the next newline without being buffered.
    TooLong {
        /// The line's length in bytes.
        bytes: u64,
    },
    /// The line starts like a JSON object but is not one (truncated by
    /// rotation or `--limit-bytes`, split by CRI, or corrupted).
    BadJson {
        /// Byte offset within the line (after framing) where parsing failed.
        at: usize,
    },
    /// The line's JSON nests deeper than 128 levels (objects and arrays),
    /// the most the parser reads; zap's lines nest a few.
    TooDeep {
        /// Byte offset within the line (after framing) of the bracket
        /// opening the 129th level.
        at: usize,
    },
    /// A JSON fragment: the tail of a line cut at its start (rotation), or
    /// the second half of a CRI-split line.
    JsonFragment,
    /// A known message whose required key is missing or has the wrong type.
    MissingKey(&'static str),
    /// A `[pod/...]` or kubelet timestamp prefix that is not well formed.
    BadFraming,
    /// A vLLM stats line whose numbers do not parse.
    BadVllmStats,
    /// A vLLM stats line cut mid-field: its last field stops short of its
    /// value's unit (`Waiting: 5 re`, `GPU KV cache us`).
    CutVllmStats,
    /// A decisions JSON-lines record that is not valid (not JSON, a required
    /// field missing, a wrong type, an unknown outcome).
    BadRecord(String),
    /// A number outside its domain: a count of tokens, requests or
    /// endpoints (`tokenLoad`, `total`, `inFlightTokens`, …) that is
    /// negative, NaN, infinite or overflows `f64` (`1e400`); a score or
    /// threshold that is not finite; a `ts` (or
    /// kubelet timestamp) before 1970 or from 2100 on (year 9999). The line is not used: no estimate is
    /// made from it, and no open request is evicted by its time.
    OutOfRange(&'static str),
    /// A trace document longer than
    /// [`crate::ParseOptions::max_trace_document_bytes`]: skipped up to its
    /// end without being held.
    TraceTooLong {
        /// Its length in bytes.
        bytes: u64,
        /// The cap, bytes.
        cap: u64,
    },
    /// A trace document (OTLP/JSON, Jaeger or Tempo) that is not valid JSON
    /// of its shape, or is cut.
    BadTrace(String),
}

impl std::fmt::Display for MalformedReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MalformedReason::TooLong { bytes } => {
                write!(f, "line of {bytes} bytes exceeds the line-length cap")
            }
            MalformedReason::BadJson { at } => write!(f, "invalid JSON object at byte {at}"),
            MalformedReason::TooDeep { at } => write!(
                f,
                "JSON nested deeper than {} levels at byte {at}",
                crate::MAX_JSON_DEPTH
            ),
            MalformedReason::JsonFragment => f.write_str("JSON fragment (truncated line)"),
            MalformedReason::MissingKey(k) => write!(f, "missing or mistyped key `{k}`"),
            MalformedReason::BadFraming => f.write_str("malformed kubectl prefix or timestamp"),
            MalformedReason::BadVllmStats => f.write_str("unparsable vLLM stats line"),
            MalformedReason::CutVllmStats => {
                f.write_str("vLLM stats line cut short (its last field is incomplete)")
            }
            MalformedReason::BadRecord(why) => write!(f, "invalid decision record: {why}"),
            MalformedReason::OutOfRange(k) => write!(f, "value of `{k}` out of range"),
            MalformedReason::TraceTooLong { bytes, cap } => write!(
                f,
                "trace document of {bytes} bytes is over the cap of {} (raise it with --max-trace-document-mib, or query a shorter period)",
                if cap % (1 << 20) == 0 {
                    format!("{} MiB", cap >> 20)
                } else {
                    format!("{cap} bytes")
                }
            ),
            MalformedReason::BadTrace(why) => write!(f, "invalid trace document: {why}"),
        }
    }
}

/// One malformed line kept for the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MalformedLine {
    /// Where it is.
    pub at: SourceLoc,
    /// Why it is malformed.
    pub reason: MalformedReason,
}

impl std::fmt::Display for MalformedLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.reason)
    }
}

/// The shape of a line after framing, for the ledger's breakdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LineShape {
    /// A zap JSON object.
    ZapJson,
    /// A zap console-encoder line (tab-separated, old builds).
    Console,
    /// A klog line from client-go.
    Klog,
    /// A vLLM log record.
    Vllm,
    /// vLLM V0's own prefix cache line, `Prefix cache hit rate: GPU: x%,
    /// CPU: y%` (counted as a vLLM line too).
    VllmV0HitRate,
    /// A kubectl `error: ...` line.
    KubectlError,
    /// A Go panic, goroutine header or stack frame.
    GoPanic,
    /// An empty or whitespace-only line.
    Blank,
    /// A decisions JSON-lines record.
    DecisionRecord,
    /// A line of a trace document.
    Trace,
    /// Anything else.
    Other,
}

/// Per-shape line counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ShapeCounts {
    /// Zap JSON lines.
    pub zap_json: u64,
    /// Console-encoder lines.
    pub console: u64,
    /// klog lines.
    pub klog: u64,
    /// vLLM lines.
    pub vllm: u64,
    /// Of the vLLM lines, vLLM V0's `Prefix cache hit rate: GPU: x%, CPU:
    /// y%` lines: read as a note (their rate is not applied to V0's
    /// prompt throughput).
    pub vllm_v0_hit_rate: u64,
    /// kubectl `error:` lines.
    pub kubectl_error: u64,
    /// Go panic and stack lines.
    pub go_panic: u64,
    /// Blank lines.
    pub blank: u64,
    /// Decision records.
    pub decision_record: u64,
    /// Lines of trace documents.
    pub trace: u64,
    /// Other lines.
    pub other: u64,
}

impl ShapeCounts {
    /// Counts one line of a shape.
    pub fn add(&mut self, shape: LineShape) {
        let c = match shape {
            LineShape::ZapJson => &mut self.zap_json,
            LineShape::Console => &mut self.console,
            LineShape::Klog => &mut self.klog,
            LineShape::Vllm => &mut self.vllm,
            LineShape::VllmV0HitRate => {
                self.vllm_v0_hit_rate += 1;
                &mut self.vllm
            }
            LineShape::KubectlError => &mut self.kubectl_error,
            LineShape::GoPanic => &mut self.go_panic,
            LineShape::Blank => &mut self.blank,
            LineShape::DecisionRecord => &mut self.decision_record,
            LineShape::Trace => &mut self.trace,
            LineShape::Other => &mut self.other,
        };
        *c += 1;
    }

    pub(crate) fn merge(&mut self, o: &ShapeCounts) {
        self.zap_json += o.zap_json;
        self.console += o.console;
        self.klog += o.klog;
        self.vllm += o.vllm;
        self.vllm_v0_hit_rate += o.vllm_v0_hit_rate;
        self.kubectl_error += o.kubectl_error;
        self.go_panic += o.go_panic;
        self.blank += o.blank;
        self.decision_record += o.decision_record;
        self.trace += o.trace;
        self.other += o.other;
    }
}

/// Line, byte and decision counts of one input, or of all of them.
///
/// Invariant: `lines_total == lines_used + lines_ignored + lines_malformed`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Lines read (a last line without a newline counts).
    pub lines_total: u64,
    /// Lines that produced an event (a filter, scheduler, scorer, request,
    /// startup or vLLM stats line) or a decision record.
    pub lines_used: u64,
    /// Well-formed lines the analysis does not need.
    pub lines_ignored: u64,
    /// Lines that could not be read as any known shape (see
    /// [`MalformedReason`]).
    pub lines_malformed: u64,
    /// Of the malformed lines, those with a number or time outside its
    /// domain ([`MalformedReason::OutOfRange`]).
    pub lines_out_of_range: u64,
    /// Bytes read, after decompression.
    pub bytes: u64,
    /// Bytes read before decompression (equal to `bytes` for plain input).
    pub bytes_compressed: u64,
    /// Lines per shape.
    pub shapes: ShapeCounts,
    /// Decisions emitted.
    pub decisions: u64,
    /// Decisions closed by their request's `Request handled` line (or read
    /// from records).
    pub decisions_complete: u64,
    /// Decisions closed by the end of the input or by a reused request id
    /// before `Request handled` (logs that end mid-request, retries).
    pub decisions_incomplete: u64,
    /// Decisions closed by eviction (open-request cap or age limit).
    pub decisions_evicted: u64,
    /// Decisions whose filter line has no `Completed running filter plugin
    /// successfully` line naming the instance.
    pub decisions_without_instance: u64,
    /// Requests evicted from the open set.
    pub requests_evicted: u64,
    /// Of `requests_evicted`, those evicted because the open requests held
    /// more than [`crate::ParseOptions::max_open_bytes`] (or one request
    /// an eighth of it).
    pub requests_evicted_for_memory: u64,
    /// Lines whose numbers were flagged huge (`>= 1e300`).
    pub values_huge: u64,
    /// Lines whose numbers were `"NaN"`/`"+Inf"`/`"-Inf"` strings.
    pub values_non_finite: u64,
    /// vLLM stats records emitted.
    pub vllm_stats: u64,
    /// Spans read from trace documents (every span, of any name).
    pub trace_spans: u64,
    /// Decisions from trace spans whose `run_scheduler_profile` ancestor was
    /// not found (not exported, or evicted from the waiting buffer).
    pub trace_decisions_without_profile: u64,
    /// The first malformed lines (up to [`crate::ParseOptions::keep_malformed`]).
    pub first_malformed: Vec<MalformedLine>,
    /// Lines per pod of the kubectl `--prefix`, counted while every pod
    /// has few ([`PodLines`]).
    #[serde(skip)]
    pub pod_lines: PodLines,
}

/// Lines a pod keeps in a `kubectl logs -l SELECTOR` capture without
/// `--tail=-1`: kubectl then prints only the last 10 lines of each pod.
pub const KUBECTL_SELECTOR_TAIL: u64 = 10;

/// Pods counted at most by [`PodLines`]: a capture of more pods is not
/// taken for a selector capture cut at [`KUBECTL_SELECTOR_TAIL`] lines.
const MAX_PODS_COUNTED: usize = 4096;

/// The lines of each pod named by a kubectl `[pod/NAME/CONTAINER] ` prefix
/// (a line over the line-length cap is not looked at), counted as the
/// lines are read while every pod has at most [`KUBECTL_SELECTOR_TAIL`]
/// lines and there are at most 4,096 pods; past that nothing more is kept.
/// The same lines give the same counts however the input is cut into
/// blocks and read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodLines {
    lines: rustc_hash::FxHashMap<Box<[u8]>, u64>,
    /// A pod has more lines, or there are more pods, than counted.
    beyond: bool,
}

impl PodLines {
    /// Counts one line (as read, with its prefixes).
    pub(crate) fn line(&mut self, raw: &[u8]) {
        if self.beyond {
            return;
        }
        let Some(rest) = raw.strip_prefix(b"[pod/") else {
            return;
        };
        let name = &rest[..memchr::memchr(b'/', rest).unwrap_or(rest.len())];
        self.add(name, 1);
    }

    fn add(&mut self, name: &[u8], n: u64) {
        let pods = self.lines.len();
        let count = match self.lines.get_mut(name) {
            Some(c) => {
                *c += n;
                *c
            }
            None if pods >= MAX_PODS_COUNTED => return self.give_up(),
            None => {
                self.lines.insert(name.into(), n);
                n
            }
        };
        if count > KUBECTL_SELECTOR_TAIL {
            self.give_up();
        }
    }

    fn give_up(&mut self) {
        self.beyond = true;
        self.lines = Default::default();
    }

    /// Adds the counts of other lines.
    pub(crate) fn merge(&mut self, o: &PodLines) {
        if o.beyond {
            self.give_up();
        }
        for (name, &n) in &o.lines {
            if self.beyond {
                return;
            }
            self.add(name, n);
        }
    }

    /// When lines have a pod prefix and every pod has at most
    /// [`KUBECTL_SELECTOR_TAIL`] lines: the number of pods and the most
    /// lines of one.
    pub fn all_short(&self) -> Option<(usize, u64)> {
        if self.beyond {
            return None;
        }
        let most = self.lines.values().copied().max()?;
        Some((self.lines.len(), most))
    }
}

impl Counts {
    /// Whether `lines_total == lines_used + lines_ignored + lines_malformed`.
    pub fn balanced(&self) -> bool {
        self.lines_total == self.lines_used + self.lines_ignored + self.lines_malformed
    }

    /// Adds another count into this one, keeping at most `keep` malformed lines.
    pub fn merge(&mut self, o: &Counts, keep: usize) {
        self.lines_total += o.lines_total;
        self.lines_used += o.lines_used;
        self.lines_ignored += o.lines_ignored;
        self.lines_malformed += o.lines_malformed;
        self.lines_out_of_range += o.lines_out_of_range;
        self.bytes += o.bytes;
        self.bytes_compressed += o.bytes_compressed;
        self.shapes.merge(&o.shapes);
        self.decisions += o.decisions;
        self.decisions_complete += o.decisions_complete;
        self.decisions_incomplete += o.decisions_incomplete;
        self.decisions_evicted += o.decisions_evicted;
        self.decisions_without_instance += o.decisions_without_instance;
        self.requests_evicted += o.requests_evicted;
        self.requests_evicted_for_memory += o.requests_evicted_for_memory;
        self.values_huge += o.values_huge;
        self.values_non_finite += o.values_non_finite;
        self.vllm_stats += o.vllm_stats;
        self.trace_spans += o.trace_spans;
        self.trace_decisions_without_profile += o.trace_decisions_without_profile;
        self.pod_lines.merge(&o.pod_lines);
        for m in &o.first_malformed {
            if self.first_malformed.len() >= keep {
                break;
            }
            self.first_malformed.push(m.clone());
        }
    }

    /// Counts one malformed line (and, for [`MalformedReason::OutOfRange`],
    /// one out of range), keeps it among the first ones (up to
    /// [`ParseOptions::keep_malformed`]), or returns it as the error under
    /// [`ParseOptions::strict`].
    pub(crate) fn malformed(
        &mut self,
        m: MalformedLine,
        opts: &ParseOptions,
    ) -> Result<(), ParseError> {
        self.lines_malformed += 1;
        if matches!(m.reason, MalformedReason::OutOfRange(_)) {
            self.lines_out_of_range += 1;
        }
        if opts.strict {
            return Err(ParseError::Malformed(m));
        }
        if self.first_malformed.len() < opts.keep_malformed {
            self.first_malformed.push(m);
        }
        Ok(())
    }

    /// Counts one emitted decision by how it was closed.
    pub fn count_decision(&mut self, completion: Completion, has_instance: bool) {
        self.decisions += 1;
        match completion {
            Completion::Handled | Completion::Record | Completion::Traced => {
                self.decisions_complete += 1
            }
            Completion::Superseded | Completion::EndOfInput => self.decisions_incomplete += 1,
            Completion::Evicted => self.decisions_evicted += 1,
        }
        if !has_instance {
            self.decisions_without_instance += 1;
        }
    }
}

/// The input's format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputFormat {
    /// Detect from the first non-blank line: a JSON object with `"v":1`,
    /// `"v":2` or `"v":3` and `candidates` is a decisions record, anything
    /// else is logs.
    #[default]
    Auto,
    /// EPP / vLLM logs.
    Logs,
    /// Decisions JSON lines.
    Decisions,
    /// OpenTelemetry traces: OTLP/JSON (Collector `file` exporter, Tempo)
    /// or a Jaeger query response.
    Traces,
}

/// The ledger of one input.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputLedger {
    /// The input's display name (path, or `-`).
    pub name: String,
    /// The deployment name given or derived for the input as a whole, if any.
    pub deployment: Option<String>,
    /// Whether the input was gzip-compressed.
    pub gzip: bool,
    /// The format used (never `Auto`).
    pub format: InputFormat,
    /// Its counts.
    pub counts: Counts,
}

/// The ledger of a whole parse: one entry per input, and the total.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Ledger {
    /// One entry per input file (after expanding folders and globs).
    pub inputs: Vec<InputLedger>,
    /// The sum over inputs.
    pub total: Counts,
    /// Files not read: found in a folder or by a glob and not an input
    /// (not a regular file, a symlink that cannot be followed, content
    /// that is no log or record), an output of the run, or a second name
    /// of a file already read.
    pub skipped: Vec<crate::input::SkippedFile>,
}

impl Ledger {
    /// Adds one input's ledger, updating the total.
    pub fn push(&mut self, input: InputLedger, keep: usize) {
        self.total.merge(&input.counts, keep);
        self.inputs.push(input);
    }
}

#[cfg(test)]
mod pod_lines_tests {
    use crate::{ParseOptions, parse_slice};

    /// A capture whose pods have `lines[i]` lines each, interleaved.
    fn capture(lines: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let most = lines.iter().copied().max().unwrap_or(0);
        for k in 0..most {
            for (p, &n) in lines.iter().enumerate() {
                if k < n {
                    out.extend_from_slice(
                        format!(
                            "[pod/epp-{p}-7c9d8-xk2lp/epp] {{\"level\":\"info\",\"ts\":1755786974.{k},\"msg\":\"Starting\"}}\n"
                        )
                        .as_bytes(),
                    );
                }
            }
        }
        out
    }

    /// The lines of each pod are counted as they are read, the same on
    /// one thread and on several in blocks of any size.
    #[test]
    fn pods_are_counted_while_read_on_any_thread_count() {
        for (lines, want) in [
            (vec![3, 10, 1], Some((3, 10))),
            (vec![3, 11, 1], None),
            (vec![], None),
        ] {
            let log = capture(&lines);
            for (threads, block_bytes) in [(1, 1 << 20), (2, 64), (3, 200)] {
                let opts = ParseOptions {
                    threads,
                    block_bytes,
                    ..ParseOptions::default()
                };
                let p = parse_slice("c.log", &log, &opts).unwrap();
                assert_eq!(
                    p.ledger.counts.pod_lines.all_short(),
                    want,
                    "{lines:?}, {threads} threads, {block_bytes} B blocks"
                );
            }
        }
        // More pods than counted: not taken for a cut selector capture.
        let many = vec![1; super::MAX_PODS_COUNTED + 1];
        let p = parse_slice("c.log", &capture(&many), &ParseOptions::default()).unwrap();
        assert_eq!(p.ledger.counts.pod_lines.all_short(), None);
    }
}
