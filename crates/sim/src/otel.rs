//! The EPP's OpenTelemetry spans of the filter's decisions, as OTLP/JSON
//! lines (the Collector's `file` exporter), with head sampling.
//!
//! Per sampled request (one trace), per scheduling profile run: a
//! `run_scheduler_profile` span (`llm_d.epp.scheduling.profile.name`), its
//! `filter_endpoints` child, and under that one `filter_prefix_cache_affinity`
//! span per filter decision with the attributes the upstream filter sets:
//! `llm_d.epp.filter.candidate_endpoints`, `.affinity_threshold`,
//! `gen_ai.request.model`, `gen_ai.request.id`, `.sticky_endpoints` (once the
//! filter has split the candidates: not for `not_applicable` or
//! `exploration`), `.ttft_penalty_ms` (the truth's gate input, whenever the
//! gate was evaluated) and `.decision` (the outcome). The resource carries
//! `service.name`, `k8s.namespace.name`, `k8s.deployment.name` (the EPP
//! Deployment, `<deployment>-epp`) and `k8s.pod.name`, as the Collector's
//! `k8sattributes` processor adds them.
//!
//! Spans are written as a batch span processor exports them: by end time,
//! children before parents, [`BATCH_REQUESTS`] requests a line; the profile
//! and stage spans of the last request of a batch end after the export and
//! go to the next line (so a reader must wait for a parent across lines).
//!
//! Sampling is per request, deterministic in the seed: a request is kept
//! when a hash of the seed, its EPP pod and its request id falls under the
//! ratio ([`is_sampled`]).

use std::io::{self, Write};

use crate::scenario::Scenario;
use crate::truth::TruthRecord;

/// Requests per exported line.
pub const BATCH_REQUESTS: usize = 64;

/// Scope of the scheduler's spans.
const SCHED_SCOPE: &str = "llm-d-router/pkg/epp/scheduling";
/// Scope of the scheduling plugins' spans.
const PLUGIN_SCOPE: &str = "llm-d-router/pkg/epp/framework/plugins/scheduling";

fn mix(mut h: u64) -> u64 {
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

fn hash(seed: u64, parts: &[&str]) -> u64 {
    let mut h = mix(seed ^ 0x7472_6163_6573_0001);
    for p in parts {
        for b in p.bytes() {
            h = mix(h ^ u64::from(b));
        }
        h = mix(h ^ 0xff);
    }
    h
}

/// Whether the request of a decision is in the trace sample of `ratio`
/// (0 to 1) for `seed`.
pub fn is_sampled(seed: u64, ratio: f64, rec: &TruthRecord) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    let h = hash(seed, &[&rec.epp_pod, &rec.request_id]);
    ((h >> 11) as f64 / (1u64 << 53) as f64) < ratio
}

/// One span, ready to write.
struct Span {
    pod: String,
    plugin: bool,
    json: String,
}

/// Writes the spans of sampled decisions as OTLP/JSON lines; feed it the
/// truth records in order ([`TraceWriter::push`]), then
/// [`TraceWriter::finish`].
pub struct TraceWriter<'s, W: Write> {
    w: W,
    scenario: &'s Scenario,
    seed: u64,
    ratio: f64,
    /// The current request's records.
    request: Vec<TruthRecord>,
    /// Spans ended, to export.
    batch: Vec<Span>,
    /// Spans that end after the current batch's export.
    late: Vec<Span>,
    requests_in_batch: usize,
    decisions: u64,
}

fn str_attr(key: &str, v: &str) -> String {
    format!(
        r#"{{"key":"{key}","value":{{"stringValue":{}}}}}"#,
        serde_json::Value::String(v.to_string())
    )
}

fn int_attr(key: &str, v: i64) -> String {
    format!(r#"{{"key":"{key}","value":{{"intValue":"{v}"}}}}"#)
}

fn double_attr(key: &str, v: f64) -> String {
    let n = if v.is_nan() {
        "\"NaN\"".to_string()
    } else if v.is_infinite() {
        if v > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        }
        .to_string()
    } else {
        serde_json::to_string(&v).unwrap_or_else(|_| "0".into())
    };
    format!(r#"{{"key":"{key}","value":{{"doubleValue":{n}}}}}"#)
}

fn nanos(ts: f64) -> u64 {
    (ts * 1e9).round().max(0.0) as u64
}

impl<'s, W: Write> TraceWriter<'s, W> {
    /// A writer of the spans of `scenario`'s decisions, sampled at `ratio`.
    pub fn new(w: W, scenario: &'s Scenario, seed: u64, ratio: f64) -> Self {
        TraceWriter {
            w,
            scenario,
            seed,
            ratio,
            request: Vec::new(),
            batch: Vec::new(),
            late: Vec::new(),
            requests_in_batch: 0,
            decisions: 0,
        }
    }

    /// Adds one truth record (records of one request are consecutive).
    pub fn push(&mut self, rec: &TruthRecord) -> io::Result<()> {
        if let Some(last) = self.request.last()
            && (last.request_id != rec.request_id || last.epp_pod != rec.epp_pod)
        {
            self.end_request()?;
        }
        self.request.push(rec.clone());
        Ok(())
    }

    /// Writes what is left; returns the inner writer and the decisions
    /// written.
    pub fn finish(mut self) -> io::Result<(W, u64)> {
        self.end_request()?;
        self.batch.append(&mut self.late);
        self.export()?;
        self.w.flush()?;
        Ok((self.w, self.decisions))
    }

    fn threshold(&self, rec: &TruthRecord) -> Option<f64> {
        let d = self
            .scenario
            .deployments
            .iter()
            .find(|d| d.name == rec.deployment)?;
        let in_pool = |own: bool| {
            d.pools
                .iter()
                .filter(move |p| (p.profile == rec.profile) == own)
                .flat_map(|p| p.filters.iter())
                .find(|f| f.name == rec.filter)
        };
        in_pool(true)
            .or_else(|| in_pool(false))
            .map(|f| f.config.affinity_threshold)
    }

    fn model(&self, rec: &TruthRecord) -> Option<String> {
        self.scenario
            .deployments
            .iter()
            .find(|d| d.name == rec.deployment)
            .map(|d| d.model.clone())
    }

    fn end_request(&mut self) -> io::Result<()> {
        let recs = std::mem::take(&mut self.request);
        let Some(first) = recs.first() else {
            return Ok(());
        };
        if !is_sampled(self.seed, self.ratio, first) {
            return Ok(());
        }
        let trace_id = format!(
            "{:016x}{:016x}",
            hash(self.seed, &[&first.epp_pod, &first.request_id, "t1"]),
            hash(self.seed, &[&first.epp_pod, &first.request_id, "t2"])
        );
        let root = format!("{:016x}", hash(self.seed, &[&trace_id, "root"]));
        let mut n = 0u64;
        let mut span_id = || {
            n += 1;
            format!("{:016x}", hash(self.seed, &[&trace_id, &n.to_string()]))
        };
        let mut out: Vec<Span> = Vec::new();
        let mut late: Vec<Span> = Vec::new();
        let mut i = 0;
        while i < recs.len() {
            let profile = recs[i].profile.clone();
            let mut j = i;
            while j < recs.len() && recs[j].profile == profile {
                j += 1;
            }
            let run = &recs[i..j];
            let pid = span_id();
            let sid = span_id();
            let start = run[0].ts - 0.000_2;
            let end = run[run.len() - 1].ts + 0.000_3;
            let pod = run[0].epp_pod.clone();
            for rec in run {
                let threshold = self.threshold(rec);
                let mut attrs = vec![int_attr(
                    "llm_d.epp.filter.candidate_endpoints",
                    rec.candidates.len() as i64,
                )];
                if let Some(t) = threshold {
                    attrs.push(double_attr("llm_d.epp.filter.affinity_threshold", t));
                }
                if let Some(m) = self.model(rec) {
                    attrs.push(str_attr("gen_ai.request.model", &m));
                }
                attrs.push(str_attr("gen_ai.request.id", &rec.request_id));
                if !matches!(rec.outcome.as_str(), "not_applicable" | "exploration")
                    && let Some(t) = threshold
                {
                    let sticky = rec
                        .candidates
                        .iter()
                        .filter(|c| match (c.match_blocks, c.total_blocks) {
                            (Some(m), Some(tb)) if tb > 0 => m as f64 / tb as f64 >= t,
                            _ => false,
                        })
                        .count();
                    attrs.push(int_attr("llm_d.epp.filter.sticky_endpoints", sticky as i64));
                }
                if let Some(g) = rec.truth_gate_input_ms {
                    attrs.push(double_attr("llm_d.epp.filter.ttft_penalty_ms", g));
                }
                attrs.push(str_attr("llm_d.epp.filter.decision", &rec.outcome));
                let id = span_id();
                out.push(Span {
                    pod: pod.clone(),
                    plugin: true,
                    json: format!(
                        r#"{{"traceId":"{trace_id}","spanId":"{id}","parentSpanId":"{sid}","name":"filter_prefix_cache_affinity","kind":1,"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{}],"status":{{}}}}"#,
                        nanos(rec.ts),
                        nanos(rec.ts) + 40_000,
                        attrs.join(",")
                    ),
                });
                self.decisions += 1;
            }
            let stage = Span {
                pod: pod.clone(),
                plugin: false,
                json: format!(
                    r#"{{"traceId":"{trace_id}","spanId":"{sid}","parentSpanId":"{pid}","name":"filter_endpoints","kind":1,"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{}],"status":{{}}}}"#,
                    nanos(start + 0.000_05),
                    nanos(end - 0.000_1),
                    int_attr(
                        "llm_d.epp.filter.candidate_endpoints",
                        run[0].candidates.len() as i64
                    )
                ),
            };
            let prof = Span {
                pod,
                plugin: false,
                json: format!(
                    r#"{{"traceId":"{trace_id}","spanId":"{pid}","parentSpanId":"{root}","name":"run_scheduler_profile","kind":1,"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{}],"status":{{}}}}"#,
                    nanos(start),
                    nanos(end),
                    str_attr("llm_d.epp.scheduling.profile.name", &profile)
                ),
            };
            late.push(stage);
            late.push(prof);
            i = j;
        }
        // The spans of the request before this one that ended late.
        self.batch.append(&mut self.late);
        self.batch.append(&mut out);
        self.requests_in_batch += 1;
        if self.requests_in_batch >= BATCH_REQUESTS {
            // This request's profile spans end after the export.
            self.late = late;
            self.export()?;
            self.requests_in_batch = 0;
        } else {
            self.batch.append(&mut late);
        }
        Ok(())
    }

    /// Writes the batch as one `ExportTraceServiceRequest` line: one
    /// resource per EPP pod, one scope per instrumentation scope.
    fn export(&mut self) -> io::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let spans = std::mem::take(&mut self.batch);
        let mut pods: Vec<&str> = Vec::new();
        for s in &spans {
            if !pods.contains(&s.pod.as_str()) {
                pods.push(&s.pod);
            }
        }
        let mut resources = Vec::new();
        for pod in pods {
            let dep = self.scenario.deployments.iter().find(|d| d.epp_pod == pod);
            let mut attrs = vec![str_attr("service.name", "llm-d-router-epp")];
            if let Some(d) = dep {
                attrs.push(str_attr("k8s.namespace.name", &d.namespace));
                attrs.push(str_attr("k8s.deployment.name", &format!("{}-epp", d.name)));
            }
            attrs.push(str_attr("k8s.pod.name", pod));
            let mut scopes = Vec::new();
            for (plugin, scope) in [(false, SCHED_SCOPE), (true, PLUGIN_SCOPE)] {
                let list: Vec<&str> = spans
                    .iter()
                    .filter(|s| s.pod == pod && s.plugin == plugin)
                    .map(|s| s.json.as_str())
                    .collect();
                if !list.is_empty() {
                    scopes.push(format!(
                        r#"{{"scope":{{"name":"{scope}"}},"spans":[{}]}}"#,
                        list.join(",")
                    ));
                }
            }
            resources.push(format!(
                r#"{{"resource":{{"attributes":[{}]}},"scopeSpans":[{}]}}"#,
                attrs.join(","),
                scopes.join(",")
            ));
        }
        writeln!(self.w, r#"{{"resourceSpans":[{}]}}"#, resources.join(","))?;
        Ok(())
    }
}

/// The spans of `truth`'s sampled decisions as OTLP/JSON lines.
pub fn write_traces<W: Write>(
    w: W,
    scenario: &Scenario,
    truth: &[TruthRecord],
    seed: u64,
    ratio: f64,
) -> io::Result<(W, u64)> {
    let mut t = TraceWriter::new(w, scenario, seed, ratio);
    for r in truth {
        t.push(r)?;
    }
    t.finish()
}

/// Standard base64 of bytes (with padding).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Hex id to base64, as Tempo writes ids in its JSON.
fn hex_to_base64(hex: &str) -> String {
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    base64(&bytes)
}

/// The spans of OTLP/JSON lines, per trace id (in first-seen order), each
/// with its resource's attributes.
fn spans_by_trace(
    otlp: &str,
    traces: usize,
) -> Vec<(String, Vec<(serde_json::Value, serde_json::Value)>)> {
    use serde_json::Value;
    let mut out: Vec<(String, Vec<(Value, Value)>)> = Vec::new();
    for line in otlp.lines() {
        let Ok(doc) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        for rs in doc["resourceSpans"].as_array().into_iter().flatten() {
            let res = rs["resource"]["attributes"].clone();
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for sp in ss["spans"].as_array().into_iter().flatten() {
                    let t = sp["traceId"].as_str().unwrap_or_default().to_string();
                    if let Some(i) = out.iter().position(|(id, _)| *id == t) {
                        out[i].1.push((res.clone(), sp.clone()));
                    } else if out.len() < traces {
                        out.push((t, vec![(res.clone(), sp.clone())]));
                    }
                }
            }
        }
    }
    out
}

/// The first `traces` traces of OTLP/JSON lines as Tempo's trace-by-id
/// responses (`{"batches": [...]}`, ids in base64), one pretty-printed
/// document per trace, one after the other.
pub fn to_tempo(otlp: &str, traces: usize) -> String {
    use serde_json::{Value, json};
    let mut out = String::new();
    for (_, spans) in spans_by_trace(otlp, traces) {
        let mut batches: Vec<(Value, Vec<Value>)> = Vec::new();
        for (res, mut sp) in spans {
            for k in ["traceId", "spanId", "parentSpanId"] {
                if let Some(h) = sp[k].as_str() {
                    sp[k] = Value::String(hex_to_base64(h));
                }
            }
            match batches.iter_mut().find(|(r, _)| *r == res) {
                Some((_, v)) => v.push(sp),
                None => batches.push((res, vec![sp])),
            }
        }
        let doc = json!({
            "batches": batches
                .into_iter()
                .map(|(r, s)| json!({"resource": {"attributes": r}, "scopeSpans": [{"scope": {"name": SCHED_SCOPE}, "spans": s}]}))
                .collect::<Vec<_>>()
        });
        out.push_str(&serde_json::to_string_pretty(&doc).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// The first `traces` traces of OTLP/JSON lines as one Jaeger query
/// response (`{"data": [...]}`), pretty-printed.
pub fn to_jaeger(otlp: &str, traces: usize) -> String {
    use serde_json::{Map, Value, json};
    let tag = |kv: &Value| -> Value {
        let v = &kv["value"];
        let (ty, val) = if let Some(s) = v["stringValue"].as_str() {
            ("string", json!(s))
        } else if let Some(i) = v["intValue"].as_str().and_then(|s| s.parse::<i64>().ok()) {
            ("int64", json!(i))
        } else if let Some(b) = v["boolValue"].as_bool() {
            ("bool", json!(b))
        } else {
            ("float64", v["doubleValue"].clone())
        };
        json!({"key": kv["key"], "type": ty, "value": val})
    };
    let mut data = Vec::new();
    for (trace_id, spans) in spans_by_trace(otlp, traces) {
        let mut procs: Vec<Value> = Vec::new();
        let mut jspans = Vec::new();
        for (res, sp) in spans {
            let idx = match procs.iter().position(|p| *p == res) {
                Some(i) => i,
                None => {
                    procs.push(res.clone());
                    procs.len() - 1
                }
            };
            let ns = |k: &str| {
                sp[k]
                    .as_str()
                    .and_then(|s| s.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let mut refs = Vec::new();
            if let Some(p) = sp["parentSpanId"].as_str() {
                refs.push(json!({"refType": "CHILD_OF", "traceID": trace_id, "spanID": p}));
            }
            jspans.push(json!({
                "traceID": trace_id,
                "spanID": sp["spanId"],
                "operationName": sp["name"],
                "references": refs,
                "flags": 1,
                "startTime": ns("startTimeUnixNano") / 1000,
                "duration": (ns("endTimeUnixNano").saturating_sub(ns("startTimeUnixNano"))) / 1000,
                "tags": sp["attributes"].as_array().into_iter().flatten().map(tag).collect::<Vec<_>>(),
                "logs": [],
                "processID": format!("p{}", idx + 1),
                "warnings": null
            }));
        }
        let mut processes = Map::new();
        for (i, res) in procs.iter().enumerate() {
            let attrs = res.as_array().cloned().unwrap_or_default();
            let service = attrs
                .iter()
                .find(|kv| kv["key"] == "service.name")
                .and_then(|kv| kv["value"]["stringValue"].as_str())
                .unwrap_or("unknown")
                .to_string();
            let tags: Vec<Value> = attrs
                .iter()
                .filter(|kv| kv["key"] != "service.name")
                .map(tag)
                .collect();
            processes.insert(
                format!("p{}", i + 1),
                json!({"serviceName": service, "tags": tags}),
            );
        }
        data.push(
            json!({"traceID": trace_id, "spans": jspans, "processes": processes, "warnings": null}),
        );
    }
    let doc = json!({"data": data, "total": 0, "limit": 0, "offset": 0, "errors": null});
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}
