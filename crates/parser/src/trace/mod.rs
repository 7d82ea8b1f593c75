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
//! Any of them may be gzip-compressed. The input's first document sets
//! its layout: when its first line holds a whole document (or is not JSON
//! at all), the input is one document per line, and a line that does not
//! parse, one cut short by a Collector killed mid-write included, is one
//! malformed line: the next line is read afresh. Only when the input
//! starts with a document spread over several lines (pretty-printed, as
//! `jq .` or a browser saves a response) are documents gathered over
//! lines, each up to the line where its brackets close. A first line that
//! does not close followed by a line that opens a document of its own is
//! a cut first line, not a pretty-printed document.
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
//! [`crate::ParseOptions::max_trace_document_bytes`]
//! ([`DEFAULT_MAX_TRACE_DOCUMENT_BYTES`], 32 MiB); a longer one is counted
//! as malformed (all its lines) and skipped up to its end without being
//! held. A span's ancestors end
//! after it, so an exporter writes them in the same document or a later
//! one: a filter span whose profile span is not in its own document waits
//! for it among at most [`MAX_PENDING`] waiting decisions; when that many
//! wait, the oldest is emitted without a profile (counted in
//! [`crate::Counts::trace_decisions_without_profile`]), and so are those
//! still waiting at the end of the input. Memory is bounded by one document
//! and the waiting decisions, never by the input's size.
//!
//! # Fast path
//!
//! A document is first read by [`fast`], written for the lines the
//! Collector's `file` exporter writes: one `{"resourceSpans": [...]}`
//! object, members in any order. It walks the
//! bytes once, checks the JSON grammar as it goes, builds nothing for the
//! spans it does not read (only their ids), and reads the attributes of the
//! filter and profile spans into the same [`values::SpanAttrs`] the
//! general reader ([`general`], serde) fills. Anything else (another
//! document shape, bytes that are not UTF-8, an escape where a value is
//! read, a duplicate member, a value of an unexpected type, any syntax
//! error) sends the whole document to the general reader, so an input is
//! read, counted and reported the same either way; the tests hold the two
//! to the same decisions on every simulated trace and on malformed ones.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::Read;

use gatecal_filter::Outcome;
use rustc_hash::FxHashMap;

use crate::assemble::DeploymentNaming;
use crate::decision::{Completion, Decision, FilterMsg, SourceLoc};
use crate::error::ParseError;
use crate::ledger::{Counts, InputFormat, InputLedger, MalformedLine, MalformedReason};
use crate::lines::{Line, LineReader};
use crate::{Item, ParseOptions};

use values::{ResourceIds, Scalar, SpanAttrs, count_u32};

mod fast;
mod general;
#[cfg(test)]
mod tests;
mod values;

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

/// Decisions waiting for their profile span at most (each about 1 KiB:
/// about 25 MiB).
pub const MAX_PENDING: usize = 20_000;
/// Default of [`crate::ParseOptions::max_trace_document_bytes`]: 32 MiB.
/// A document is held whole while it is read (its buffer up to twice its
/// size) and parsed into about half its size again: about 100 MiB at the
/// cap. The Collector's `file` exporter writes lines of a few hundred KiB;
/// a Jaeger response of 10,000 three-span traces, pretty-printed, is about
/// 27 MiB.
pub const DEFAULT_MAX_TRACE_DOCUMENT_BYTES: usize = 32 << 20;
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

/// A span as the linking needs it.
struct SpanRef<'a> {
    id: Cow<'a, str>,
    parent: Option<Cow<'a, str>>,
    /// The profile name, for a [`PROFILE_SPAN`].
    profile: Option<Option<Cow<'a, str>>>,
}

/// The decisions of a document's filter spans, each with its parent's id.
type Filters<'a> = Vec<(Box<Decision>, Option<Cow<'a, str>>)>;

/// How an input lays its documents out, known from its first document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// No document read yet.
    Unknown,
    /// One document per line (the Collector's `file` exporter): a line
    /// that does not parse is one malformed line.
    Lines,
    /// Documents spread over several lines (a pretty-printed response).
    Pretty,
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
    /// How documents are laid out.
    layout: Layout,
    /// A document over the cap being skipped: its first line and its bytes
    /// so far.
    skipping: Option<(u64, u64)>,
    /// The first value out of its domain in the document being read.
    out_of_range: std::cell::Cell<Option<&'static str>>,
    /// Whether documents are tried on the fast path first.
    fast: bool,
    /// Documents read by the fast path.
    fast_documents: u64,
    /// Spans and filter spans of the last document read.
    last_spans: usize,
    last_filters: usize,
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
            layout: Layout::Unknown,
            skipping: None,
            out_of_range: std::cell::Cell::new(None),
            fast: true,
            fast_documents: 0,
            last_spans: 0,
            last_filters: 0,
        }
    }

    fn malformed_at(&mut self, line: u64, reason: MalformedReason) -> Result<(), ParseError> {
        let m = MalformedLine {
            at: SourceLoc {
                file: self.display.as_str().into(),
                line,
            },
            reason,
        };
        self.counts.malformed(m, self.opts)
    }

    /// Counts `n` lines of a document, starting at `first`.
    fn account(
        &mut self,
        first: u64,
        n: u64,
        result: Result<bool, serde_json::Error>,
    ) -> Result<(), ParseError> {
        self.counts.shapes.trace += n;
        if let (Ok(_), Some(k)) = (&result, self.out_of_range.take()) {
            // Its decisions are emitted (a bad one unknown), and its lines
            // counted malformed, as a malformed filter line is.
            return self.malformed_lines(first, n, crate::domain::out_of_range(k));
        }
        match result {
            Ok(true) => self.counts.lines_used += n,
            Ok(false) => self.counts.lines_ignored += n,
            Err(e) => self.malformed_lines(first, n, MalformedReason::BadTrace(e.to_string()))?,
        }
        Ok(())
    }

    /// Counts the `n` lines of a document starting at `first` as malformed,
    /// the first one with `reason`.
    fn malformed_lines(
        &mut self,
        first: u64,
        n: u64,
        reason: MalformedReason,
    ) -> Result<(), ParseError> {
        self.malformed_at(first, reason)?;
        self.counts.lines_malformed += n - 1;
        Ok(())
    }

    /// Drops the document being gathered (up to this line) as malformed.
    fn drop_document(&mut self, reason: MalformedReason) -> Result<(), ParseError> {
        let first = self.doc_first;
        let n = self.line - first + 1;
        self.doc = Vec::new();
        self.counts.shapes.trace += n;
        self.malformed_lines(first, n, reason)
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
        if let Some((_, bytes)) = &mut self.skipping {
            *bytes += raw.len() as u64 + 1;
            return self.skip(raw);
        }
        let t = crate::classify::trim_end(raw);
        let start = t.iter().take_while(|c| c.is_ascii_whitespace()).count();
        let t = &t[start..];
        if !self.doc.is_empty() && self.layout == Layout::Unknown && looks_like_traces(t) {
            // The input's first line did not close, and this one opens a
            // new document on one line: the first was a line cut short,
            // and the input is one document per line.
            let first = self.doc_first;
            let len = self.doc.len() as u64 - 1;
            self.doc = Vec::new();
            self.counts.shapes.trace += 1;
            self.layout = Layout::Lines;
            self.malformed_at(first, cut_short(len))?;
        }
        if !self.doc.is_empty() {
            let len = self.doc.len() + raw.len() + 1;
            let cap = self.opts.max_trace_document_bytes.max(1);
            if len > cap {
                // Dropped; its remaining lines are skipped up to its end,
                // and counted with its whole length there.
                self.doc = Vec::new();
                self.skipping = Some((self.doc_first, len as u64));
                return self.skip(raw);
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
                self.layout = Layout::Pretty;
            }
            return Ok(());
        }
        if t.is_empty() {
            self.counts.shapes.blank += 1;
            self.counts.lines_ignored += 1;
            return Ok(());
        }
        let line = self.line;
        match self.document(t, line, sink) {
            Err(e) if json_cut_short(t, &e) && self.layout != Layout::Lines => {
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
            Err(e) if json_cut_short(t, &e) => {
                // One document per line: this one was cut short.
                self.counts.shapes.trace += 1;
                self.malformed_at(line, cut_short(t.len() as u64))
            }
            r => {
                if self.layout == Layout::Unknown {
                    self.layout = Layout::Lines;
                }
                self.account(line, 1, r)
            }
        }
    }

    /// One line of a document over the cap, already counted: scanned for
    /// its brackets only, up to the line that closes the document.
    fn skip(&mut self, raw: &[u8]) -> Result<(), ParseError> {
        self.scan(raw);
        if self.depth <= 0 && !self.in_str {
            self.depth = 0;
            self.esc = false;
            return self.end_skip();
        }
        Ok(())
    }

    /// Counts the lines of the document skipped (up to this line).
    fn end_skip(&mut self) -> Result<(), ParseError> {
        let Some((first, bytes)) = self.skipping.take() else {
            return Ok(());
        };
        let cap = self.opts.max_trace_document_bytes.max(1) as u64;
        let n = self.line - first + 1;
        self.counts.shapes.trace += n;
        self.malformed_lines(first, n, MalformedReason::TraceTooLong { bytes, cap })
    }

    /// Reads one document; returns whether it held any span read.
    fn document(
        &mut self,
        bytes: &[u8],
        line: u64,
        sink: &mut dyn FnMut(Item),
    ) -> Result<bool, serde_json::Error> {
        // Sized as the last document was (documents of one input are alike).
        let mut spans: Vec<SpanRef<'_>> = Vec::with_capacity(self.last_spans);
        let mut filters: Filters<'_> = Vec::with_capacity(self.last_filters);
        self.out_of_range.set(None);
        if self.fast && fast::read(self, bytes, line, &mut spans, &mut filters).is_some() {
            self.fast_documents += 1;
        } else {
            self.out_of_range.set(None);
            spans.clear();
            filters.clear();
            general::read(self, bytes, line, &mut spans, &mut filters)?;
        }
        self.last_spans = spans.len().min(1 << 16);
        self.last_filters = filters.len().min(1 << 16);
        Ok(self.link(&spans, filters, sink))
    }

    /// Gives each decision of a document its profile (or leaves it waiting
    /// for an ancestor of a later document); returns whether the document
    /// held any span read.
    fn link(
        &mut self,
        spans: &[SpanRef<'_>],
        filters: Filters<'_>,
        sink: &mut dyn FnMut(Item),
    ) -> bool {
        self.counts.trace_spans += spans.len() as u64;
        let used = !filters.is_empty() || spans.iter().any(|s| s.profile.is_some());
        let mut by_id: FxHashMap<&str, usize> =
            FxHashMap::with_capacity_and_hasher(spans.len(), Default::default());
        by_id.extend(spans.iter().enumerate().map(|(i, s)| (s.id.as_ref(), i)));
        // Decisions of earlier documents waiting for a span of this one.
        if self.waiting > 0 {
            let mut resumed = Vec::new();
            for (i, s) in spans.iter().enumerate() {
                if let Some(w) = self.pending.remove(s.id.as_ref()) {
                    resumed.push((i, w));
                }
            }
            for (i, ws) in resumed {
                self.waiting -= ws.len();
                for w in ws {
                    self.walk(w, Some(&spans[i].id), spans, &by_id, sink);
                }
            }
        }
        for (d, parent) in filters {
            self.walk(
                Waiting {
                    decision: d,
                    hops: 0,
                },
                parent.as_deref(),
                spans,
                &by_id,
                sink,
            );
        }
        while self.waiting > MAX_PENDING {
            self.evict_oldest(sink);
        }
        used
    }

    /// Follows `next` (the id of an ancestor) up to a profile span: emits the
    /// decision when found (or when the chain ends), else leaves it waiting
    /// for the first ancestor not in this document.
    fn walk<'s>(
        &mut self,
        mut w: Waiting,
        mut next: Option<&'s str>,
        spans: &'s [SpanRef<'_>],
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
            match by_id.get(id) {
                Some(&i) => {
                    let s = &spans[i];
                    if let Some(p) = &s.profile {
                        w.decision.profile = p.as_deref().map(Into::into);
                        self.emit(w.decision, true, sink);
                        return;
                    }
                    next = s.parent.as_deref();
                }
                None => {
                    self.order.push_back(id.to_string());
                    self.pending.entry(id.to_string()).or_default().push(w);
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

    /// The decision of one filter span, its start time (epoch seconds)
    /// read from `ts_key`. A value outside its domain
    /// ([`crate::domain`]: a count that is negative, no number or past
    /// 2^53, a threshold that is not finite, a start time outside
    /// [`crate::domain::TS_RANGE`]) makes the decision's outcome unknown
    /// and unsets its values, as a malformed filter line does, and the
    /// document is counted malformed (`value of KEY out of range`).
    fn decision(
        &self,
        ids: &ResourceIds,
        mut a: SpanAttrs<'_>,
        ts: Option<f64>,
        ts_key: &'static str,
        line: u64,
    ) -> Box<Decision> {
        use crate::domain::{is_count, is_threshold, is_timestamp};
        // A value given: its number, or NaN when it is none.
        let num = |v: &Option<Scalar<'_>>| match v {
            None | Some(Scalar::Other) => None,
            Some(v) => Some(v.as_f64().unwrap_or(f64::NAN)),
        };
        let checks: [Check; 4] = [
            (ATTR_STICKY, num(&a.sticky), is_count),
            (ATTR_CANDIDATES, num(&a.candidates), is_count),
            (ATTR_THRESHOLD, num(&a.threshold), is_threshold),
            (ts_key, ts, is_timestamp),
        ];
        let bad = checks
            .iter()
            .find(|(_, v, ok)| v.is_some_and(|x| !ok(x)))
            .map(|(k, ..)| *k);
        let penalty_no_number = num(&a.penalty).is_some_and(|x| x.is_nan())
            && a.penalty.as_ref().and_then(Scalar::as_f64).is_none();
        let bad = bad.or(penalty_no_number.then_some(ATTR_PENALTY));
        let mut ts = ts;
        let outcome_of = |v: Scalar<'_>| match v {
            Scalar::Str(s) => Outcome::parse(&s),
            v => v.into_string().as_deref().and_then(Outcome::parse),
        };
        if let Some(k) = bad {
            if self.out_of_range.get().is_none() {
                self.out_of_range.set(Some(k));
            }
            let logged = a.decision.take().and_then(outcome_of);
            a = SpanAttrs {
                request_id: a.request_id.take(),
                model: a.model.take(),
                ..SpanAttrs::default()
            };
            if k == ts_key {
                ts = None;
            }
            let mut d = self.decision_of(ids, a, ts, line, None);
            d.message = message_of(logged);
            return d;
        }
        let outcome = a.decision.take().and_then(outcome_of);
        self.decision_of(ids, a, ts, line, outcome)
    }

    fn decision_of(
        &self,
        ids: &ResourceIds,
        a: SpanAttrs<'_>,
        ts: Option<f64>,
        line: u64,
        outcome: Option<Outcome>,
    ) -> Box<Decision> {
        let model = a.model.and_then(Scalar::into_string);
        let deployment = self.naming.resolve_traced(
            ids.deployment.as_deref(),
            ids.pod.as_deref(),
            ids.service.as_deref(),
            ids.namespace.as_deref().or(model.as_deref()),
        );
        Box::new(Decision {
            deployment: deployment.into(),
            ts: ts.filter(|t| t.is_finite()),
            completion: Completion::Traced,
            traced: true,
            source: SourceLoc {
                file: self.display.as_str().into(),
                line,
            },
            epp_pod: ids.pod.as_deref().map(Into::into),
            outcome,
            message: message_of(outcome),
            traced_penalty_ms: a.penalty.and_then(|v| v.as_f64()),
            sticky: a.sticky.and_then(|v| v.as_f64()).and_then(count_u32),
            total: a.candidates.and_then(|v| v.as_f64()).and_then(count_u32),
            affinity_threshold: a.threshold.and_then(|v| v.as_f64()),
            request_id: a.request_id.and_then(Scalar::into_string).map(Into::into),
            model: model.map(Into::into),
            ..Decision::default()
        })
    }

    /// Ends the input: emits the decisions still waiting, without a profile.
    pub(crate) fn finish(
        mut self,
        sink: &mut dyn FnMut(Item),
        bytes: u64,
        compressed: u64,
        gzip: bool,
    ) -> Result<InputLedger, ParseError> {
        self.end_skip()?;
        if !self.doc.is_empty() {
            // A document cut at the end of the input.
            self.drop_document(MalformedReason::BadTrace(
                "document cut at the end of the input".into(),
            ))?;
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

/// A value checked against its domain: its key, the value if given (NaN
/// when it is no number), the domain.
type Check = (&'static str, Option<f64>, fn(f64) -> bool);

/// The filter message that logs an outcome.
fn message_of(outcome: Option<Outcome>) -> FilterMsg {
    match outcome {
        Some(Outcome::Sticky) => FilterMsg::NarrowedToSticky,
        Some(Outcome::NoMatch) => FilterMsg::NoSticky,
        Some(Outcome::Exploration) => FilterMsg::ExplorationSkip,
        Some(Outcome::LoadOverride) => FilterMsg::TtftGateBroken,
        Some(Outcome::MissingSignal) => FilterMsg::MissingSignal,
        Some(Outcome::RequestLoadOverride) => FilterMsg::RequestGateBroken,
        Some(Outcome::NotApplicable) | None => FilterMsg::None,
    }
}

/// Why a line of a one-document-per-line input that ends inside its
/// document is malformed.
/// Whether a JSON document `text` that serde_json could not read (`e`)
/// was cut short: it ended early, or an object begun ends inside a number
/// (`…1787321142.`, `-`, `1e`), which serde_json reports as an invalid
/// number at the last character rather than as an early end.
pub fn json_cut_short(text: &[u8], e: &serde_json::Error) -> bool {
    if e.is_eof() {
        return true;
    }
    let text = text.trim_ascii();
    if text.first() != Some(&b'{')
        || !text
            .last()
            .is_some_and(|b| b.is_ascii_digit() || b".-+eE".contains(b))
    {
        return false;
    }
    let last = text.split(|&b| b == b'\n').count();
    let width = text.rsplit(|&b| b == b'\n').next().map_or(0, <[u8]>::len);
    e.line() == last && e.column() >= width
}

fn cut_short(bytes: u64) -> MalformedReason {
    MalformedReason::BadTrace(format!(
        "line cut short after {bytes} bytes (the document does not close; the next line is read as a document of its own)"
    ))
}

/// Reads a whole trace stream (already decompressed) on this thread.
pub(crate) fn run<R: Read>(
    reader: R,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
) -> Result<(InputLedger, u64), ParseError> {
    run_with(reader, display, naming, opts, sink, true).map(|(il, bytes, _)| (il, bytes))
}

/// [`run`], with the fast path or without it; also returns how many
/// documents the fast path read.
pub(crate) fn run_with<R: Read>(
    reader: R,
    display: &str,
    naming: DeploymentNaming,
    opts: &ParseOptions,
    sink: &mut dyn FnMut(Item),
    fast: bool,
) -> Result<(InputLedger, u64, u64), ParseError> {
    let mut lines = LineReader::new(reader, opts.max_trace_document_bytes);
    let mut tr = TraceReader::new(display, naming, opts);
    tr.fast = fast;
    loop {
        match lines.next_line() {
            Ok(Some(Line::Text(t))) => tr.line(t, sink)?,
            Ok(Some(Line::TooLong(n))) => {
                tr.line += 1;
                tr.counts.lines_total += 1;
                if let Some((_, bytes)) = &mut tr.skipping {
                    // A line of a document being skipped (its brackets
                    // unread: a long string, most likely).
                    *bytes += n + 1;
                } else if !tr.doc.is_empty() {
                    // The document being gathered goes past the cap.
                    let bytes = tr.doc.len() as u64 + n + 1;
                    tr.doc = Vec::new();
                    tr.skipping = Some((tr.doc_first, bytes));
                } else {
                    tr.counts.shapes.trace += 1;
                    let l = tr.line;
                    let cap = opts.max_trace_document_bytes.max(1) as u64;
                    tr.malformed_at(l, MalformedReason::TraceTooLong { bytes: n, cap })?;
                }
            }
            Ok(None) => break,
            Err(e) => return Err(ParseError::io(display, e)),
        }
    }
    let bytes = lines.bytes;
    let fast_documents = tr.fast_documents;
    Ok((tr.finish(sink, bytes, bytes, false)?, bytes, fast_documents))
}
