//! OpenTelemetry trace input: the EPP's `filter_prefix_cache_affinity` spans
//! as decisions whose gate input is exact.
//!
//! # Shapes read
//!
//! * OTLP/JSON as the OpenTelemetry Collector's `file` exporter writes it:
//!   one `ExportTraceServiceRequest` object per line, `resourceSpans` →
//!   `scopeSpans` (or the older `instrumentationLibrarySpans`) → `spans`;
//!   attributes `[{"key", "value": {"stringValue" | "intValue" |
//!   "doubleValue" | "boolValue"}}]`, 64-bit integers as strings or
//!   numbers, `startTimeUnixNano` as a string or a number;
//! * Tempo's trace-by-id response: the same objects under `batches`
//!   (`/api/traces/ID`) or `trace.resourceSpans` (`/api/v2/traces/ID`);
//!   Jaeger's `/api/v3` responses under `result.resourceSpans`;
//! * Jaeger's query API response (`/api/traces`, `/api/traces/ID`):
//!   `{"data": [{"traceID", "spans": [{"spanID", "operationName",
//!   "references": [{"refType": "CHILD_OF", "spanID"}], "startTime" (µs),
//!   "tags": [{"key", "type", "value"}], "processID"}], "processes": {ID:
//!   {"serviceName", "tags"}}}]}`.
//!
//! Any of them may be pretty-printed over many lines, and gzip-compressed.
//! Span and trace ids are compared as written (hex or base64), never
//! decoded.
//!
//! # Decisions
//!
//! One decision per `filter_prefix_cache_affinity` span: outcome from
//! `llm_d.epp.filter.decision`, the exact gate input from
//! `llm_d.epp.filter.ttft_penalty_ms` (set whenever the TTFT gate was
//! evaluated, held or released), `sticky_endpoints`, `candidate_endpoints`,
//! `affinity_threshold`, `gen_ai.request.id` and `gen_ai.request.model`;
//! the profile is `llm_d.epp.scheduling.profile.name` of the nearest
//! `run_scheduler_profile` ancestor (the filter span's parent is the
//! profile's filter-stage span, whose parent is the profile run). The
//! deployment comes from the resource attributes the Collector's
//! `k8sattributes` processor adds (see [`DeploymentNaming::resolve_traced`]).
//!
//! # Bounds
//!
//! A document (one line of the `file` exporter, or one whole Jaeger or
//! Tempo response) is parsed as a whole: it may be at most
//! [`crate::ParseOptions::max_trace_document_bytes`] (256 MiB by default);
//! a longer one is counted as malformed and skipped. A span's ancestors end
//! after it, so an exporter writes them in the same document or a later
//! one: a filter span whose profile span is not in its own document waits
//! for it among at most [`MAX_PENDING`] waiting decisions; when that many
//! wait, the oldest is emitted without a profile (counted in
//! [`crate::Counts::trace_decisions_without_profile`]), and so are those
//! still waiting at the end of the input. Memory is bounded by one document
//! and the waiting decisions, never by the input's size.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::Read;

use gatecal_filter::Outcome;
use rustc_hash::FxHashMap;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::value::RawValue;

use crate::assemble::DeploymentNaming;
use crate::decision::{Completion, Decision, FilterMsg, SourceLoc};
use crate::error::ParseError;
use crate::ledger::{Counts, InputFormat, InputLedger, MalformedLine, MalformedReason};
use crate::lines::{Line, LineReader};
use crate::{Item, ParseOptions};

/// The span the filter opens for every call.
pub const FILTER_SPAN: &str = "filter_prefix_cache_affinity";
/// The span of one scheduling profile run.
pub const PROFILE_SPAN: &str = "run_scheduler_profile";
/// Attribute of [`PROFILE_SPAN`]: the profile's name.
pub const ATTR_PROFILE: &str = "llm_d.epp.scheduling.profile.name";
/// Attribute of [`FILTER_SPAN`]: the outcome (the metric's label).
pub const ATTR_DECISION: &str = "llm_d.epp.filter.decision";
/// Attribute of [`FILTER_SPAN`]: `bestStickyTTFT - bestNonStickyTTFT`, ms,
/// set whenever the TTFT gate was evaluated.
pub const ATTR_PENALTY: &str = "llm_d.epp.filter.ttft_penalty_ms";
/// Attribute of [`FILTER_SPAN`]: endpoints meeting the affinity threshold.
pub const ATTR_STICKY: &str = "llm_d.epp.filter.sticky_endpoints";
/// Attribute of [`FILTER_SPAN`]: endpoints the filter saw.
pub const ATTR_CANDIDATES: &str = "llm_d.epp.filter.candidate_endpoints";
/// Attribute of [`FILTER_SPAN`]: the configured affinity threshold.
pub const ATTR_THRESHOLD: &str = "llm_d.epp.filter.affinity_threshold";
/// Attribute of [`FILTER_SPAN`]: the request's `x-request-id`.
pub const ATTR_REQUEST_ID: &str = "gen_ai.request.id";
/// Attribute of [`FILTER_SPAN`]: the target model.
pub const ATTR_MODEL: &str = "gen_ai.request.model";

/// Decisions waiting for their profile span at most.
pub const MAX_PENDING: usize = 100_000;
/// Default of [`crate::ParseOptions::max_trace_document_bytes`]: 256 MiB.
pub const DEFAULT_MAX_TRACE_DOCUMENT_BYTES: usize = 256 << 20;
/// Ancestors followed from a filter span to its profile span at most.
const MAX_HOPS: usize = 16;

/// Whether the start of an input (after decompression) is a trace document:
/// a JSON object whose first member is `resourceSpans` or `batches` (an
/// array), `trace` or `result` (an object), or Jaeger's `data` (an array).
/// Zap lines start with `level` or `ts`, decision records with `v`.
pub fn looks_like_traces(head: &[u8]) -> bool {
    let ws = |s: &[u8]| -> usize { s.iter().take_while(|c| c.is_ascii_whitespace()).count() };
    let mut i = ws(head);
    if head.get(i) != Some(&b'{') {
        return false;
    }
    i += 1;
    i += ws(&head[i..]);
    if head.get(i) != Some(&b'"') {
        return false;
    }
    let rest = &head[i + 1..];
    let Some(end) = memchr::memchr(b'"', rest) else {
        return false;
    };
    let key = &rest[..end];
    let mut j = end + 1;
    j += ws(&rest[j..]);
    if rest.get(j) != Some(&b':') {
        return false;
    }
    j += 1;
    j += ws(&rest[j..]);
    let open = rest.get(j).copied();
    match key {
        b"resourceSpans" | b"batches" | b"data" => open == Some(b'['),
        b"trace" | b"result" => open == Some(b'{'),
        _ => false,
    }
}

/// Whether one line starts a trace document ([`looks_like_traces`]), or is
/// the second line of a pretty-printed one: a `resourceSpans`, `batches` or
/// `data` member opening an array.
pub(crate) fn looks_like_trace_line(line: &[u8]) -> bool {
    if looks_like_traces(line) {
        return true;
    }
    let t = line.trim_ascii_start();
    ["\"resourceSpans\"", "\"batches\"", "\"data\""]
        .iter()
        .any(|k| {
            t.strip_prefix(k.as_bytes())
                .map(|r| r.trim_ascii_start())
                .and_then(|r| r.strip_prefix(b":"))
                .is_some_and(|r| r.trim_ascii_start().starts_with(b"["))
        })
}

// ---------------------------------------------------------------------------
// Serde shapes (borrowed; unknown members are skipped).

/// A number written as a JSON number or a string (`"123"`, `"NaN"`,
/// `"Infinity"`, `"-Infinity"`), as protobuf's JSON mapping does.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    U(u64),
    F(f64),
}

impl Num {
    fn f64(self) -> f64 {
        match self {
            Num::U(u) => u as f64,
            Num::F(f) => f,
        }
    }
}

fn num_of_str(s: &str) -> Option<Num> {
    if let Ok(u) = s.parse::<u64>() {
        return Some(Num::U(u));
    }
    match s {
        "NaN" => Some(Num::F(f64::NAN)),
        "Infinity" | "+Infinity" => Some(Num::F(f64::INFINITY)),
        "-Infinity" => Some(Num::F(f64::NEG_INFINITY)),
        _ => s.parse::<f64>().ok().map(Num::F),
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Num, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number or a numeric string")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num::U(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num::F(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num::F(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                num_of_str(v).ok_or_else(|| E::custom(format!("not a number: {v:?}")))
            }
        }
        d.deserialize_any(V)
    }
}

/// A scalar attribute value, OTLP or Jaeger.
#[derive(Clone, Debug, PartialEq)]
enum Scalar<'a> {
    Str(Cow<'a, str>),
    Num(Num),
    Bool(bool),
    Other,
}

impl Scalar<'_> {
    fn as_f64(&self) -> Option<f64> {
        match self {
            Scalar::Num(n) => Some(n.f64()),
            Scalar::Str(s) => num_of_str(s).map(Num::f64),
            _ => None,
        }
    }

    fn into_string(self) -> Option<String> {
        match self {
            Scalar::Str(s) => Some(s.into_owned()),
            Scalar::Num(Num::U(u)) => Some(u.to_string()),
            Scalar::Num(Num::F(f)) => Some(f.to_string()),
            Scalar::Bool(b) => Some(b.to_string()),
            Scalar::Other => None,
        }
    }
}

/// Jaeger's tag `value`: a JSON string, number or boolean.
struct JaegerValue<'a>(Scalar<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for JaegerValue<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<JaegerValue<'a>, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = JaegerValue<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a tag value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Str(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Str(Cow::Owned(v.to_string()))))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Num(Num::U(v))))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Num(Num::F(v as f64))))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Num(Num::F(v))))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Bool(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(JaegerValue(Scalar::Other))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(JaegerValue(Scalar::Other))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {}
                Ok(JaegerValue(Scalar::Other))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Doc<'a> {
    #[serde(borrow, default, rename = "resourceSpans")]
    resource_spans: Option<Vec<ResourceSpans<'a>>>,
    #[serde(borrow, default)]
    batches: Option<Vec<ResourceSpans<'a>>>,
    #[serde(borrow, default)]
    trace: Option<Inner<'a>>,
    #[serde(borrow, default)]
    result: Option<Inner<'a>>,
    #[serde(borrow, default)]
    data: Option<Vec<JaegerTrace<'a>>>,
}

#[derive(Deserialize)]
struct Inner<'a> {
    #[serde(borrow, default, rename = "resourceSpans")]
    resource_spans: Option<Vec<ResourceSpans<'a>>>,
}

#[derive(Deserialize)]
struct ResourceSpans<'a> {
    #[serde(borrow, default)]
    resource: Option<Resource<'a>>,
    #[serde(borrow, default, rename = "scopeSpans")]
    scope_spans: Option<Vec<ScopeSpans<'a>>>,
    #[serde(borrow, default, rename = "instrumentationLibrarySpans")]
    library_spans: Option<Vec<ScopeSpans<'a>>>,
}

#[derive(Deserialize)]
struct Resource<'a> {
    #[serde(borrow, default)]
    attributes: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ScopeSpans<'a> {
    #[serde(borrow, default)]
    spans: Option<Vec<OtlpSpan<'a>>>,
}

#[derive(Deserialize)]
struct OtlpSpan<'a> {
    #[serde(borrow, default, rename = "spanId")]
    span_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "parentSpanId")]
    parent_span_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(default, rename = "startTimeUnixNano")]
    start_ns: Option<Num>,
    #[serde(borrow, default)]
    attributes: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct KeyValue<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    value: Option<AnyValue<'a>>,
}

#[derive(Deserialize)]
struct AnyValue<'a> {
    #[serde(borrow, default, rename = "stringValue")]
    string_value: Option<Cow<'a, str>>,
    #[serde(default, rename = "intValue")]
    int_value: Option<Num>,
    #[serde(default, rename = "doubleValue")]
    double_value: Option<Num>,
    #[serde(default, rename = "boolValue")]
    bool_value: Option<bool>,
}

impl<'a> AnyValue<'a> {
    fn scalar(self) -> Scalar<'a> {
        if let Some(s) = self.string_value {
            Scalar::Str(s)
        } else if let Some(n) = self.int_value.or(self.double_value) {
            Scalar::Num(n)
        } else if let Some(b) = self.bool_value {
            Scalar::Bool(b)
        } else {
            Scalar::Other
        }
    }
}

#[derive(Deserialize)]
struct JaegerTrace<'a> {
    #[serde(borrow, default)]
    spans: Option<Vec<JaegerSpan<'a>>>,
    #[serde(borrow, default)]
    processes: Option<FxHashMap<Cow<'a, str>, JaegerProcess<'a>>>,
}

#[derive(Deserialize)]
struct JaegerSpan<'a> {
    #[serde(borrow, default, rename = "spanID")]
    span_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "parentSpanID")]
    parent_span_id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "operationName")]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    references: Option<Vec<JaegerRef<'a>>>,
    #[serde(default, rename = "startTime")]
    start_us: Option<Num>,
    #[serde(borrow, default)]
    tags: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "processID")]
    process_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct JaegerRef<'a> {
    #[serde(borrow, default, rename = "refType")]
    ref_type: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "spanID")]
    span_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct JaegerProcess<'a> {
    #[serde(borrow, default, rename = "serviceName")]
    service_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tags: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct JaegerTag<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
    #[serde(borrow, default)]
    value: Option<JaegerValue<'a>>,
}

// ---------------------------------------------------------------------------
// Normalised spans.

/// How a span's attributes are written.
#[derive(Clone, Copy)]
enum AttrKind {
    Otlp,
    Jaeger,
}

/// Calls `f` with every attribute of a list, OTLP or Jaeger shaped.
fn for_attrs<'a>(
    raw: Option<&'a RawValue>,
    kind: AttrKind,
    mut f: impl FnMut(&str, Scalar<'a>),
) -> Result<(), serde_json::Error> {
    let Some(raw) = raw else { return Ok(()) };
    match kind {
        AttrKind::Otlp => {
            let kvs: Vec<KeyValue<'a>> = serde_json::from_str(raw.get())?;
            for kv in kvs {
                let v = kv.value.map_or(Scalar::Other, AnyValue::scalar);
                f(&kv.key, v);
            }
        }
        AttrKind::Jaeger => {
            let tags: Vec<JaegerTag<'a>> = serde_json::from_str(raw.get())?;
            for t in tags {
                f(&t.key, t.value.map_or(Scalar::Other, |v| v.0));
            }
        }
    }
    Ok(())
}

/// The resource attributes that name a deployment.
#[derive(Clone, Debug, Default, PartialEq)]
struct ResourceIds {
    namespace: Option<String>,
    deployment: Option<String>,
    pod: Option<String>,
    service: Option<String>,
}

impl ResourceIds {
    fn read(raw: Option<&RawValue>, kind: AttrKind, service: Option<&str>) -> ResourceIds {
        let mut r = ResourceIds {
            service: service.map(str::to_string),
            ..ResourceIds::default()
        };
        // A resource whose attributes do not parse names nothing.
        let _ = for_attrs(raw, kind, |k, v| {
            let slot = match k {
                "k8s.namespace.name" => &mut r.namespace,
                "k8s.deployment.name" => &mut r.deployment,
                "k8s.pod.name" => &mut r.pod,
                "service.name" => &mut r.service,
                _ => return,
            };
            *slot = v.into_string().filter(|s| !s.is_empty());
        });
        r
    }
}

/// A span as the linking needs it.
struct SpanRef<'a> {
    id: Cow<'a, str>,
    parent: Option<Cow<'a, str>>,
    /// The profile name, for a [`PROFILE_SPAN`].
    profile: Option<Option<String>>,
}

/// A decision waiting for its profile span.
struct Waiting {
    decision: Box<Decision>,
    /// Ancestors followed so far.
    hops: usize,
}

/// Reads one trace input.
pub(crate) struct TraceReader<'o> {
    display: String,
    naming: DeploymentNaming,
    opts: &'o ParseOptions,
    counts: Counts,
    line: u64,
    /// A document spread over several lines: its bytes so far.
    doc: Vec<u8>,
    /// Its first line.
    doc_first: u64,
    /// JSON nesting state of `doc`: depth, inside a string, after a backslash.
    depth: i64,
    in_str: bool,
    esc: bool,
    /// Waiting decisions by the span id they wait for.
    pending: FxHashMap<String, Vec<Waiting>>,
    /// Waiting keys, oldest first (resolved keys are skipped when popped).
    order: VecDeque<String>,
    waiting: usize,
}

impl<'o> TraceReader<'o> {
    pub(crate) fn new(display: &str, naming: DeploymentNaming, opts: &'o ParseOptions) -> Self {
        TraceReader {
            display: display.to_string(),
            naming,
            opts,
            counts: Counts::default(),
            line: 0,
            doc: Vec::new(),
            doc_first: 0,
            depth: 0,
            in_str: false,
            esc: false,
            pending: FxHashMap::default(),
            order: VecDeque::new(),
            waiting: 0,
        }
    }

    fn malformed_at(&mut self, line: u64, reason: MalformedReason) -> Result<(), ParseError> {
        self.counts.lines_malformed += 1;
        let m = MalformedLine {
            at: SourceLoc {
                file: self.display.clone(),
                line,
            },
            reason,
        };
        if self.opts.strict {
            return Err(ParseError::Malformed(m));
        }
        if self.counts.first_malformed.len() < self.opts.keep_malformed {
            self.counts.first_malformed.push(m);
        }
        Ok(())
    }

    /// Counts `n` lines of a document, starting at `first`.
    fn account(
        &mut self,
        first: u64,
        n: u64,
        result: Result<bool, serde_json::Error>,
    ) -> Result<(), ParseError> {
        self.counts.shapes.trace += n;
        match result {
            Ok(true) => self.counts.lines_used += n,
            Ok(false) => self.counts.lines_ignored += n,
            Err(e) => {
                let reason = MalformedReason::BadTrace(e.to_string());
                self.malformed_at(first, reason)?;
                self.counts.lines_malformed += n - 1;
            }
        }
        Ok(())
    }

    fn scan(&mut self, bytes: &[u8]) {
        for &c in bytes {
            if self.in_str {
                if self.esc {
                    self.esc = false;
                } else if c == b'\\' {
                    self.esc = true;
                } else if c == b'"' {
                    self.in_str = false;
                }
            } else {
                match c {
                    b'"' => self.in_str = true,
                    b'{' | b'[' => self.depth += 1,
                    b'}' | b']' => self.depth -= 1,
                    _ => {}
                }
            }
        }
    }

    /// One line (without its `\n`).
    pub(crate) fn line(
        &mut self,
        raw: &[u8],
        sink: &mut dyn FnMut(Item),
    ) -> Result<(), ParseError> {
        self.line += 1;
        self.counts.lines_total += 1;
        if !self.doc.is_empty() {
            if self.doc.len() + raw.len() + 1 > self.opts.max_trace_document_bytes.max(1) {
                let first = self.doc_first;
                let n = self.line - first + 1;
                self.doc = Vec::new();
                self.counts.shapes.trace += n;
                self.malformed_at(
                    first,
                    MalformedReason::TooLong {
                        bytes: self.opts.max_trace_document_bytes as u64,
                    },
                )?;
                self.counts.lines_malformed += n - 1;
                self.depth = 0;
                self.in_str = false;
                self.esc = false;
                return Ok(());
            }
            self.doc.extend_from_slice(raw);
            self.doc.push(b'\n');
            self.scan(raw);
            if self.depth <= 0 && !self.in_str {
                let doc = std::mem::take(&mut self.doc);
                let first = self.doc_first;
                let r = self.document(&doc, first, sink);
                self.account(first, self.line - first + 1, r)?;
                self.depth = 0;
            }
            return Ok(());
        }
        let t = crate::classify::trim_end(raw);
        let start = t.iter().take_while(|c| c.is_ascii_whitespace()).count();
        let t = &t[start..];
        if t.is_empty() {
            self.counts.shapes.blank += 1;
            self.counts.lines_ignored += 1;
            return Ok(());
        }
        let line = self.line;
        match self.document(t, line, sink) {
            Err(e) if e.is_eof() => {
                // The document goes on over the next lines (pretty-printed).
                self.doc.extend_from_slice(t);
                self.doc.push(b'\n');
                self.doc_first = line;
                self.depth = 0;
                self.in_str = false;
                self.esc = false;
                self.scan(t);
                Ok(())
            }
            r => self.account(line, 1, r),
        }
    }

    /// Reads one document; returns whether it held any span read.
    fn document(
        &mut self,
        bytes: &[u8],
        line: u64,
        sink: &mut dyn FnMut(Item),
    ) -> Result<bool, serde_json::Error> {
        let doc: Doc<'_> = serde_json::from_slice(bytes)?;
        let mut spans: Vec<SpanRef<'_>> = Vec::new();
        let mut filters: Vec<(Box<Decision>, Option<String>)> = Vec::new();
        let Doc {
            resource_spans,
            batches,
            trace,
            result,
            data,
        } = doc;
        for rs in [
            resource_spans,
            batches,
            trace.and_then(|t| t.resource_spans),
            result.and_then(|t| t.resource_spans),
        ]
        .into_iter()
        .flatten()
        {
            self.otlp(rs, line, &mut spans, &mut filters)?;
        }
        for t in data.into_iter().flatten() {
            let procs: FxHashMap<Cow<'_, str>, ResourceIds> = t
                .processes
                .into_iter()
                .flatten()
                .map(|(k, p)| {
                    let ids =
                        ResourceIds::read(p.tags, AttrKind::Jaeger, p.service_name.as_deref());
                    (k, ids)
                })
                .collect();
            let none = ResourceIds::default();
            for s in t.spans.into_iter().flatten() {
                let Some(id) = s.span_id else { continue };
                let parent = s
                    .references
                    .into_iter()
                    .flatten()
                    .find(|r| r.ref_type.as_deref().is_none_or(|t| t == "CHILD_OF"))
                    .and_then(|r| r.span_id)
                    .or(s.parent_span_id)
                    .filter(|p| !p.is_empty());
                let ts = s.start_us.map(|n| n.f64() / 1e6);
                match s.name.as_deref() {
                    Some(FILTER_SPAN) => {
                        let ids = s
                            .process_id
                            .as_deref()
                            .and_then(|p| procs.get(p))
                            .unwrap_or(&none);
                        let d = self.decision(ids, s.tags, AttrKind::Jaeger, ts, line)?;
                        filters.push((d, parent.as_deref().map(str::to_string)));
                        spans.push(SpanRef {
                            id,
                            parent,
                            profile: None,
                        });
                    }
                    Some(PROFILE_SPAN) => {
                        let p = profile_of(s.tags, AttrKind::Jaeger)?;
                        spans.push(SpanRef {
                            id,
                            parent,
                            profile: Some(p),
                        });
                    }
                    _ => spans.push(SpanRef {
                        id,
                        parent,
                        profile: None,
                    }),
                }
            }
        }
        self.counts.trace_spans += spans.len() as u64;
        let used = !filters.is_empty() || spans.iter().any(|s| s.profile.is_some());
        let by_id: FxHashMap<&str, usize> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_ref(), i))
            .collect();
        // Decisions of earlier documents waiting for a span of this one.
        if self.waiting > 0 {
            let mut resumed = Vec::new();
            for s in &spans {
                if let Some(w) = self.pending.remove(s.id.as_ref()) {
                    resumed.push((s.id.to_string(), w));
                }
            }
            for (id, ws) in resumed {
                self.waiting -= ws.len();
                for w in ws {
                    self.walk(w, Some(id.clone()), &spans, &by_id, sink);
                }
            }
        }
        for (d, parent) in filters {
            self.walk(
                Waiting {
                    decision: d,
                    hops: 0,
                },
                parent,
                &spans,
                &by_id,
                sink,
            );
        }
        while self.waiting > MAX_PENDING {
            self.evict_oldest(sink);
        }
        Ok(used)
    }

    /// The spans of OTLP resource spans.
    fn otlp<'a>(
        &self,
        rs: Vec<ResourceSpans<'a>>,
        line: u64,
        spans: &mut Vec<SpanRef<'a>>,
        filters: &mut Vec<(Box<Decision>, Option<String>)>,
    ) -> Result<(), serde_json::Error> {
        for r in rs {
            let ids = ResourceIds::read(
                r.resource.as_ref().and_then(|x| x.attributes),
                AttrKind::Otlp,
                None,
            );
            let scopes = r.scope_spans.into_iter().chain(r.library_spans).flatten();
            for sc in scopes {
                for s in sc.spans.into_iter().flatten() {
                    let Some(id) = s.span_id else { continue };
                    let parent = s.parent_span_id.filter(|p| !p.is_empty());
                    let ts = s.start_ns.map(ns_to_secs);
                    let profile = match s.name.as_deref() {
                        Some(FILTER_SPAN) => {
                            let d = self.decision(&ids, s.attributes, AttrKind::Otlp, ts, line)?;
                            filters.push((d, parent.as_deref().map(str::to_string)));
                            None
                        }
                        Some(PROFILE_SPAN) => Some(profile_of(s.attributes, AttrKind::Otlp)?),
                        _ => None,
                    };
                    spans.push(SpanRef {
                        id,
                        parent,
                        profile,
                    });
                }
            }
        }
        Ok(())
    }

    /// Follows `next` (the id of an ancestor) up to a profile span: emits the
    /// decision when found (or when the chain ends), else leaves it waiting
    /// for the first ancestor not in this document.
    fn walk(
        &mut self,
        mut w: Waiting,
        mut next: Option<String>,
        spans: &[SpanRef<'_>],
        by_id: &FxHashMap<&str, usize>,
        sink: &mut dyn FnMut(Item),
    ) {
        loop {
            let Some(id) = next.take() else {
                // A root without a profile span above the filter span.
                self.emit(w.decision, false, sink);
                return;
            };
            if w.hops >= MAX_HOPS {
                self.emit(w.decision, false, sink);
                return;
            }
            w.hops += 1;
            match by_id.get(id.as_str()) {
                Some(&i) => {
                    let s = &spans[i];
                    if let Some(p) = &s.profile {
                        w.decision.profile.clone_from(p);
                        self.emit(w.decision, true, sink);
                        return;
                    }
                    next = s.parent.as_deref().map(str::to_string);
                }
                None => {
                    self.order.push_back(id.clone());
                    self.pending.entry(id).or_default().push(w);
                    self.waiting += 1;
                    if self.order.len() > 4 * MAX_PENDING {
                        let pending = &self.pending;
                        self.order.retain(|k| pending.contains_key(k));
                    }
                    return;
                }
            }
        }
    }

    fn evict_oldest(&mut self, sink: &mut dyn FnMut(Item)) {
        while let Some(k) = self.order.pop_front() {
            if let Some(ws) = self.pending.remove(&k) {
                self.waiting -= ws.len();
                for w in ws {
                    self.emit(w.decision, false, sink);
                }
                return;
            }
        }
        self.waiting = 0;
    }

    fn emit(&mut self, d: Box<Decision>, with_profile: bool, sink: &mut dyn FnMut(Item)) {
        if !with_profile {
            self.counts.trace_decisions_without_profile += 1;
        }
        self.counts.count_decision(d.completion, true);
        sink(Item::Decision(d));
    }

    /// The decision of one filter span.
    fn decision(
        &self,
        ids: &ResourceIds,
        attrs: Option<&RawValue>,
        kind: AttrKind,
        ts: Option<f64>,
        line: u64,
    ) -> Result<Box<Decision>, serde_json::Error> {
        let mut d = Decision {
            ts: ts.filter(|t| t.is_finite()),
            completion: Completion::Traced,
            traced: true,
            source: SourceLoc {
                file: self.display.clone(),
                line,
            },
            epp_pod: ids.pod.clone(),
            ..Decision::default()
        };
        let mut decision: Option<String> = None;
        for_attrs(attrs, kind, |k, v| match k {
            ATTR_DECISION => decision = v.into_string(),
            ATTR_PENALTY => d.traced_penalty_ms = v.as_f64(),
            ATTR_STICKY => d.sticky = v.as_f64().and_then(count_u32),
            ATTR_CANDIDATES => d.total = v.as_f64().and_then(count_u32),
            ATTR_THRESHOLD => d.affinity_threshold = v.as_f64(),
            ATTR_REQUEST_ID => d.request_id = v.into_string(),
            ATTR_MODEL => d.model = v.into_string(),
            _ => {}
        })?;
        let outcome = decision.as_deref().and_then(Outcome::parse);
        d.outcome = outcome;
        d.message = match outcome {
            Some(Outcome::Sticky) => FilterMsg::NarrowedToSticky,
            Some(Outcome::NoMatch) => FilterMsg::NoSticky,
            Some(Outcome::Exploration) => FilterMsg::ExplorationSkip,
            Some(Outcome::LoadOverride) => FilterMsg::TtftGateBroken,
            Some(Outcome::MissingSignal) => FilterMsg::MissingSignal,
            Some(Outcome::RequestLoadOverride) => FilterMsg::RequestGateBroken,
            Some(Outcome::NotApplicable) | None => FilterMsg::None,
        };
        d.deployment = self.naming.resolve_traced(
            ids.deployment.as_deref(),
            ids.pod.as_deref(),
            ids.service.as_deref(),
            ids.namespace.as_deref().or(d.model.as_deref()),
        );
        Ok(Box::new(d))
    }

    /// Ends the input: emits the decisions still waiting, without a profile.
    pub(crate) fn finish(
        mut self,
        sink: &mut dyn FnMut(Item),
        bytes: u64,
        compressed: u64,
        gzip: bool,
    ) -> Result<InputLedger, ParseError> {
        if !self.doc.is_empty() {
            // A document cut at the end of the input.
            let first = self.doc_first;
            let n = self.line - first + 1;
            self.doc = Vec::new();
            self.counts.shapes.trace += n;
            self.malformed_at(
                first,
                MalformedReason::BadTrace("document cut at the end of the input".into()),
            )?;
            self.counts.lines_malformed += n - 1;
        }
        while self.waiting > 0 && !self.order.is_empty() {
            self.evict_oldest(sink);
        }
        self.counts.bytes = bytes;
        self.counts.bytes_compressed = compressed;
        Ok(InputLedger {
            name: self.display,
            deployment: self.naming.explicit,
            gzip,
            format: InputFormat::Traces,
            counts: self.counts,
        })
    }
}

fn count_u32(v: f64) -> Option<u32> {
    (v.is_finite() && v >= 0.0 && v <= f64::from(u32::MAX)).then_some(v as u32)
}

/// Epoch seconds of a time in ns since the epoch.
fn ns_to_secs(n: Num) -> f64 {
    match n {
        Num::U(u) => (u / 1_000_000_000) as f64 + (u % 1_000_000_000) as f64 / 1e9,
        Num::F(f) => f / 1e9,
    }
}

fn profile_of(raw: Option<&RawValue>, kind: AttrKind) -> Result<Option<String>, serde_json::Error> {
    let mut p = None;
    for_attrs(raw, kind, |k, v| {
        if k == ATTR_PROFILE {
            p = v.into_string();
        }
    })?;
    Ok(p)
}

/// Reads a whole trace stream (already decompressed) on this thread.
pub(crate) fn run<R: Read>(
    reader: R,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
) -> Result<(InputLedger, u64), ParseError> {
    let mut lines = LineReader::new(reader, opts.max_trace_document_bytes);
    let mut tr = TraceReader::new(display, naming, opts);
    loop {
        match lines.next_line() {
            Ok(Some(Line::Text(t))) => tr.line(t, sink)?,
            Ok(Some(Line::TooLong(n))) => {
                tr.line += 1;
                tr.counts.lines_total += 1;
                tr.counts.shapes.trace += 1;
                let l = tr.line;
                tr.malformed_at(l, MalformedReason::TooLong { bytes: n })?;
            }
            Ok(None) => break,
            Err(e) => return Err(ParseError::io(display, e)),
        }
    }
    let bytes = lines.bytes;
    Ok((tr.finish(sink, bytes, bytes, false)?, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing() {
        assert!(looks_like_traces(br#"{"resourceSpans":[{"resource":{}}]}"#));
        assert!(looks_like_traces(b"\n  {\n  \"data\": [\n"));
        assert!(looks_like_traces(br#"{"batches":[]}"#));
        assert!(looks_like_traces(br#"{"trace":{"resourceSpans":[]}}"#));
        assert!(!looks_like_traces(br#"{"data":"x"}"#));
        assert!(!looks_like_traces(br#"{"level":"debug","msg":"x"}"#));
        assert!(!looks_like_traces(br#"{"v":1,"candidates":[]}"#));
        assert!(!looks_like_traces(b"I0821 14:36:14.123456 1 x.go:1] y"));
        assert!(!looks_like_traces(b""));
        assert!(looks_like_trace_line(b"  \"data\": ["));
        assert!(looks_like_trace_line(br#"{"resourceSpans":[]}"#));
        assert!(!looks_like_trace_line(b"  \"data\": {"));
        assert!(!looks_like_trace_line(b"{"));
    }

    #[test]
    fn numbers() {
        assert_eq!(num_of_str("12"), Some(Num::U(12)));
        assert!(num_of_str("NaN").is_some_and(|n| n.f64().is_nan()));
        assert_eq!(num_of_str("-Infinity"), Some(Num::F(f64::NEG_INFINITY)));
        assert_eq!(num_of_str("1.5"), Some(Num::F(1.5)));
        assert_eq!(num_of_str("x"), None);
        assert_eq!(
            ns_to_secs(Num::U(1_764_482_019_250_000_000)),
            1_764_482_019.25
        );
    }
}
