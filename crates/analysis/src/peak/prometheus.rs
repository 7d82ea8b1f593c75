//! vLLM's Prometheus metrics, as `query_range` responses: the exact peak.
//!
//! # Input
//!
//! One file per query, as the Prometheus HTTP API prints it (`curl
//! '…/api/v1/query_range?query=vllm:prefix_cache_queries_total&start=…&end=…&step=15s'`):
//! `{"status":"success","data":{"resultType":"matrix","result":[{"metric":
//! {labels},"values":[[unix seconds, "value"], …]}, …]}}`, or the bare
//! `result` array (`[{"metric":…,"values":…}, …]`, what `promtool query
//! range -o json` prints), its keys in any order. Recognised by content
//! ([`looks_like_query_range`]), gzip or not, under any name. The series
//! used (others are counted and ignored):
//!
//! * `vllm:prompt_tokens_by_source_total{source="local_compute"}`: prompt
//!   tokens this engine computed (newer builds), else
//! * `vllm:prefix_cache_queries_total` − `vllm:prefix_cache_hits_total`:
//!   prompt tokens looked up minus those found cached, counted when a
//!   request is scheduled;
//! * `vllm:num_requests_waiting`: the gauge that marks saturation.
//!
//! `vllm:prompt_tokens_total` and `vllm:prompt_tokens_cached_total` are read
//! too: their difference is the computed tokens when neither of the above
//! is there.
//!
//! # Method and error bound
//!
//! A series belongs to an engine by its `pod` label (else `instance`) and
//! its `engine` label, and to a deployment by the pod: the deployment
//! `deployment_of` gives (recommend: the one whose EPP decisions name that
//! pod, else the one of that pod's vLLM lines), else its `namespace`
//! label, else the pod's owner. Counters are differenced sample to sample, a drop being a
//! restart (the increment is then the new value, as `increase()` does).
//! An interval between two samples is saturated when the waiting gauge is
//! above zero at both ends; runs of at least [`MIN_RUN`] saturated samples
//! count, less the first interval. The estimate is the computed tokens over
//! the seconds of every saturated interval of the deployment's engines, a
//! ratio of sums, with the same 90 % interval as the stats lines' (a
//! bootstrap over intervals, widened by the prompt straddling each end of
//! a run: counters move when a request is scheduled or completes, not as
//! its tokens are computed). No hit-rate correction is needed: the counts
//! are exact, so the error is the straddling prompts alone.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::peak::throughput::{PeakEstimate, PeakSource, Span, from_spans};

/// Minimum consecutive samples with requests waiting for a run to count.
pub const MIN_RUN: usize = 3;

/// One series of a response.
#[derive(Clone, Debug, PartialEq)]
pub struct PromSeries {
    /// `__name__` (or the file's query when the labels lack it).
    pub metric: String,
    /// Every label but `__name__`.
    pub labels: BTreeMap<String, String>,
    /// `(unix seconds, value)`, in order.
    pub samples: Vec<(f64, f64)>,
}

#[derive(Deserialize)]
struct Response {
    status: String,
    data: Option<Data>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<RawSeries>,
}

#[derive(Deserialize)]
struct RawSeries {
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// Whether a file's first bytes are a `query_range` response (or a bare
/// matrix): a JSON object naming `"resultType"` and `"matrix"`, or an array
/// whose first element has `"metric"` and `"values"`.
pub fn looks_like_query_range(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&head[..head.len().min(4096)]);
    let t = text.trim_start();
    if t.starts_with('{') {
        // Keys in any order (`jq -S` sorts `result` before `resultType`,
        // which may then lie past the head).
        (t.contains("\"resultType\"") && t.contains("\"matrix\""))
            || (t.contains("\"data\"")
                && t.contains("\"result\"")
                && t.contains("\"metric\"")
                && t.contains("\"values\""))
    } else if let Some(rest) = t.strip_prefix('[') {
        let r = rest.trim_start();
        r.starts_with('{') && r.contains("\"metric\"") && r.contains("\"values\"")
    } else {
        false
    }
}

/// Reads one response. `Err` with the reason when it is not a successful
/// matrix response or a value is not a number.
pub fn parse_query_range(bytes: &[u8]) -> Result<Vec<PromSeries>, String> {
    let trimmed = bytes.trim_ascii_start();
    let raw: Vec<RawSeries> = if trimmed.starts_with(b"[") {
        serde_json::from_slice(trimmed).map_err(|e| format!("not a Prometheus matrix: {e}"))?
    } else {
        let r: Response = serde_json::from_slice(trimmed)
            .map_err(|e| format!("not a Prometheus query_range response: {e}"))?;
        if r.status != "success" {
            return Err(format!(
                "the response's status is {:?}{}",
                r.status,
                r.error.map(|e| format!(": {e}")).unwrap_or_default()
            ));
        }
        let d = r.data.ok_or("the response has no data")?;
        if d.result_type != "matrix" {
            return Err(format!(
                "resultType {:?}: query_range answers a matrix (use query_range, not query)",
                d.result_type
            ));
        }
        d.result
    };
    let mut out = Vec::with_capacity(raw.len());
    for mut s in raw {
        let metric = s.metric.remove("__name__").unwrap_or_default();
        let mut samples = Vec::with_capacity(s.values.len());
        for (t, v) in s.values {
            let x: f64 = v
                .parse()
                .map_err(|_| format!("{metric}: sample at {t} is not a number: {v:?}"))?;
            if t.is_finite() && x.is_finite() {
                samples.push((t, x));
            }
        }
        samples.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.push(PromSeries {
            metric,
            labels: s.metric,
            samples,
        });
    }
    Ok(out)
}

/// The counters and gauge of one engine, by timestamp (milliseconds).
#[derive(Clone, Debug, Default)]
struct Engine {
    deployment: String,
    local_compute: BTreeMap<i64, f64>,
    queries: BTreeMap<i64, f64>,
    hits: BTreeMap<i64, f64>,
    prompt: BTreeMap<i64, f64>,
    cached: BTreeMap<i64, f64>,
    waiting: BTreeMap<i64, f64>,
}

/// A series' identity: its metric and labels.
type SeriesKey = (String, BTreeMap<String, String>);

/// Samples of one series given again with another value.
#[derive(Clone, Debug)]
struct Conflict {
    /// How many.
    count: u64,
    /// The first: time (ms), the value kept, the value not used.
    first: (i64, f64, f64),
}

/// Series pooled from every response, each sample once.
///
/// The same series (metric and labels) given in several responses (a file
/// given twice, overlapping ranges) is merged by time: a sample at a time
/// already read with the same value is a duplicate, counted once
/// ([`PromEstimator::duplicates`]); with another value it is a conflict:
/// the first read is kept, and [`PromEstimator::conflicts`] names it.
#[derive(Clone, Debug, Default)]
pub struct PromEstimator {
    series: BTreeMap<SeriesKey, BTreeMap<i64, f64>>,
    /// Series read, and those of no use here.
    pub read: u64,
    /// Series ignored (another metric, or no pod/instance label).
    pub ignored: u64,
    /// Samples read again (same series, time and value): counted once.
    pub duplicates: u64,
    /// Samples read again with another value, per series.
    conflicts: BTreeMap<SeriesKey, Conflict>,
}

/// A sample's time as the estimator keys it: milliseconds.
fn ms(t: f64) -> i64 {
    (t * 1000.0).round() as i64
}

/// A series as Prometheus writes it: `metric{label="value",…}`.
fn series_name(metric: &str, labels: &BTreeMap<String, String>) -> String {
    let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{metric}{{{}}}", l.join(","))
}

/// The deployment of a series: `deployment_of(pod)`, else its `namespace`
/// label, else the pod's owner; `None` without a pod or instance label.
fn series_deployment(
    labels: &BTreeMap<String, String>,
    deployment_of: &impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let pod = labels.get("pod").or_else(|| labels.get("instance"))?;
    Some(
        deployment_of(pod)
            .or_else(|| labels.get("namespace").cloned())
            .unwrap_or_else(|| gatecal_parser::pod_owner(pod).to_string()),
    )
}

/// The counter's increments per sample, a drop counting as a restart.
fn increments(c: &BTreeMap<i64, f64>) -> BTreeMap<i64, f64> {
    let mut out = BTreeMap::new();
    let mut prev: Option<f64> = None;
    for (&t, &v) in c {
        if let Some(p) = prev {
            out.insert(t, if v >= p { v - p } else { v });
        }
        prev = Some(v);
    }
    out
}

impl PromEstimator {
    /// Per deployment, each engine's prefix-cache counters as increments
    /// per scrape interval, `(time, queries, hits)` (for the hit rate
    /// compared with the stats lines, [`crate::peak::agreement`]); the series are
    /// tied to engines and deployments as for [`PromEstimator::estimates`].
    pub fn prefix_cache_increments(
        &self,
        deployment_of: impl Fn(&str) -> Option<String>,
    ) -> BTreeMap<String, Vec<crate::peak::agreement::CounterIncrements>> {
        // Per engine: its deployment, queries and hits by time (ms).
        type Counters = (String, BTreeMap<i64, f64>, BTreeMap<i64, f64>);
        let mut engines: BTreeMap<String, Counters> = BTreeMap::new();
        for ((metric, labels), samples) in &self.series {
            let Some(pod) = labels.get("pod").or_else(|| labels.get("instance")) else {
                continue;
            };
            let queries = match metric.trim_end_matches("_total") {
                "vllm:prefix_cache_queries" => true,
                "vllm:prefix_cache_hits" => false,
                _ => continue,
            };
            let key = format!(
                "{pod}#{}",
                labels.get("engine").map(String::as_str).unwrap_or("0")
            );
            let e = engines.entry(key).or_insert_with(|| {
                (
                    series_deployment(labels, &deployment_of).unwrap_or_default(),
                    BTreeMap::new(),
                    BTreeMap::new(),
                )
            });
            let target = if queries { &mut e.1 } else { &mut e.2 };
            target.extend(samples.iter().map(|(t, v)| (*t, *v)));
        }
        let mut out: BTreeMap<String, Vec<crate::peak::agreement::CounterIncrements>> =
            BTreeMap::new();
        for (dep, q, h) in engines.into_values() {
            let (q, h) = (increments(&q), increments(&h));
            let inc: crate::peak::agreement::CounterIncrements = q
                .iter()
                .filter_map(|(t, dq)| Some((*t as f64 / 1000.0, *dq, *h.get(t)?)))
                .collect();
            if !inc.is_empty() {
                out.entry(dep).or_default().push(inc);
            }
        }
        out
    }

    /// Adds the series of one response, each sample once (see
    /// [`PromEstimator`]).
    pub fn push(&mut self, series: Vec<PromSeries>) {
        self.read += series.len() as u64;
        for s in series {
            let key = (s.metric, s.labels);
            let merged = self.series.entry(key.clone()).or_default();
            for (t, v) in s.samples {
                let t = ms(t);
                match merged.get(&t) {
                    None => {
                        merged.insert(t, v);
                    }
                    Some(&kept) if kept == v => self.duplicates += 1,
                    Some(&kept) => {
                        self.conflicts
                            .entry(key.clone())
                            .and_modify(|c| c.count += 1)
                            .or_insert(Conflict {
                                count: 1,
                                first: (t, kept, v),
                            });
                    }
                }
            }
        }
    }

    /// Samples read again with another value (same series and time).
    pub fn conflicting_samples(&self) -> u64 {
        self.conflicts.values().map(|c| c.count).sum()
    }

    /// Per deployment (tied as for [`PromEstimator::estimates`]), a warning
    /// naming the samples given twice with different values, with the
    /// first such sample; the first value read is the one used.
    pub fn conflicts(
        &self,
        deployment_of: impl Fn(&str) -> Option<String>,
    ) -> BTreeMap<String, String> {
        let mut per: BTreeMap<String, (u64, String)> = BTreeMap::new();
        for ((metric, labels), c) in &self.conflicts {
            let dep = series_deployment(labels, &deployment_of).unwrap_or_default();
            let e = per.entry(dep).or_insert_with(|| {
                let (t, kept, other) = c.first;
                (
                    0,
                    format!(
                        "{} at {}: {kept} then {other}",
                        series_name(metric, labels),
                        t as f64 / 1000.0
                    ),
                )
            });
            e.0 += c.count;
        }
        per.into_iter()
            .map(|(dep, (n, example))| {
                (
                    dep,
                    format!(
                        "{n} Prometheus sample(s) were given twice with different values (same series and time; first {example}): the first read is used; check that the responses come from one Prometheus and one query"
                    ),
                )
            })
            .collect()
    }

    /// The estimate of each deployment, with `deployment_of(pod)` naming
    /// the deployment of a pod the EPP decisions know.
    pub fn estimates(
        &mut self,
        deployment_of: impl Fn(&str) -> Option<String>,
    ) -> BTreeMap<String, PeakEstimate> {
        let mut engines: BTreeMap<String, Engine> = BTreeMap::new();
        let mut ignored = 0;
        for ((metric, labels), samples) in &self.series {
            let pod = labels.get("pod").or_else(|| labels.get("instance"));
            let Some(pod) = pod else {
                ignored += 1;
                continue;
            };
            let key = format!(
                "{pod}#{}",
                labels.get("engine").map(String::as_str).unwrap_or("0")
            );
            let name = metric.trim_end_matches("_total");
            let e = engines.entry(key).or_insert_with(|| Engine {
                deployment: series_deployment(labels, &deployment_of).unwrap_or_default(),
                ..Engine::default()
            });
            let target = match name {
                "vllm:prompt_tokens_by_source" => match labels.get("source").map(String::as_str) {
                    Some("local_compute") => &mut e.local_compute,
                    _ => {
                        ignored += 1;
                        continue;
                    }
                },
                "vllm:prefix_cache_queries" => &mut e.queries,
                "vllm:prefix_cache_hits" => &mut e.hits,
                "vllm:prompt_tokens" => &mut e.prompt,
                "vllm:prompt_tokens_cached" => &mut e.cached,
                "vllm:num_requests_waiting" => &mut e.waiting,
                _ => {
                    ignored += 1;
                    continue;
                }
            };
            target.extend(samples.iter().map(|(t, v)| (*t, *v)));
        }
        self.ignored = ignored;
        let mut per_dep: BTreeMap<String, (Vec<Span>, u64, &'static str)> = BTreeMap::new();
        for e in engines.values() {
            // Computed tokens per interval, from the best counters present.
            let (computed, what) = if !e.local_compute.is_empty() {
                (increments(&e.local_compute), "local-compute prompt tokens")
            } else if !e.queries.is_empty() && !e.hits.is_empty() {
                let (q, h) = (increments(&e.queries), increments(&e.hits));
                (
                    q.iter()
                        .filter_map(|(t, x)| Some((*t, (x - h.get(t)?).max(0.0))))
                        .collect(),
                    "prefix-cache queries − hits",
                )
            } else if !e.prompt.is_empty() && !e.cached.is_empty() {
                let (p, c) = (increments(&e.prompt), increments(&e.cached));
                (
                    p.iter()
                        .filter_map(|(t, x)| Some((*t, (x - c.get(t)?).max(0.0))))
                        .collect(),
                    "prompt tokens − cached prompt tokens",
                )
            } else {
                continue;
            };
            let ts: Vec<i64> = e.waiting.keys().copied().collect();
            let mut spans = Vec::new();
            let mut i = 0;
            while i < ts.len() {
                if e.waiting[&ts[i]] <= 0.0 {
                    i += 1;
                    continue;
                }
                let mut j = i;
                while j + 1 < ts.len() && e.waiting[&ts[j + 1]] > 0.0 {
                    j += 1;
                }
                if j + 1 - i >= MIN_RUN {
                    let intervals: Vec<(f64, f64)> = (i + 1..=j)
                        .filter_map(|k| {
                            let c = computed.get(&ts[k])?;
                            Some((*c, (ts[k] - ts[k - 1]) as f64 / 1000.0))
                        })
                        .filter(|x| x.1 > 0.0)
                        .collect();
                    if !intervals.is_empty() {
                        spans.push(Span::exact(intervals));
                    }
                }
                i = j + 1;
            }
            let d = per_dep
                .entry(e.deployment.clone())
                .or_insert((Vec::new(), 0, what));
            if !spans.is_empty() {
                d.1 += 1;
            }
            d.0.extend(spans);
        }
        let mut out = BTreeMap::new();
        for (dep, (spans, n_engines, what)) in per_dep {
            let Some((v, interval, n)) = from_spans(&spans) else {
                continue;
            };
            out.insert(
                dep,
                PeakEstimate {
                    value: v,
                    source: PeakSource::Prometheus,
                    samples: n,
                    spread_low: None,
                    spread_high: None,
                    interval: Some(interval),
                    engines: n_engines,
                    method: format!(
                        "{what} per second from vLLM's Prometheus counters over {n} scrape interval(s) with requests waiting on {n_engines} engine(s); 90 % interval from a bootstrap over intervals widened by the straddling prompts"
                    ),
                },
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(metric: &str, extra: &str, values: &[(f64, f64)]) -> String {
        let v: Vec<String> = values
            .iter()
            .map(|(t, x)| format!("[{t},\"{x}\"]"))
            .collect();
        format!(
            "{{\"status\":\"success\",\"data\":{{\"resultType\":\"matrix\",\"result\":[{{\"metric\":{{\"__name__\":\"{metric}\",\"pod\":\"p-0\",\"namespace\":\"ns\"{extra}}},\"values\":[{}]}}]}}}}",
            v.join(",")
        )
    }

    #[test]
    fn detects_responses_and_bare_matrices() {
        let r = response("vllm:num_requests_waiting", "", &[(1.0, 0.0)]);
        assert!(looks_like_query_range(r.as_bytes()));
        assert!(looks_like_query_range(
            b"  [{\"metric\":{\"__name__\":\"x\"},\"values\":[[1,\"2\"]]}]"
        ));
        assert!(!looks_like_query_range(b"{\"ts\":1,\"msg\":\"x\"}"));
        // Sorted keys, the resultType past the head.
        let sorted = format!(
            "{{\"data\":{{\"result\":[{{\"metric\":{{\"__name__\":\"x\"}},\"values\":[{}[1,\"2\"]]}}],\"resultType\":\"matrix\"}},\"status\":\"success\"}}",
            "[0,\"1\"],".repeat(1000)
        );
        assert!(looks_like_query_range(sorted.as_bytes()));
        assert_eq!(
            parse_query_range(sorted.as_bytes()).unwrap()[0]
                .samples
                .len(),
            1001
        );
        assert!(!looks_like_query_range(b"INFO 08-21 14:36:14 x"));
        let e = parse_query_range(
            b"{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error\"}",
        )
        .unwrap_err();
        assert!(e.contains("parse error"), "{e}");
        let e = parse_query_range(
            b"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}",
        )
        .unwrap_err();
        assert!(e.contains("vector"), "{e}");
    }

    #[test]
    fn samples_given_twice_count_once_and_other_values_are_named() {
        let c: Vec<(f64, f64)> = (0..10)
            .map(|k| (15.0 * k as f64, 15_000.0 * k as f64))
            .collect();
        let w: Vec<(f64, f64)> = (0..10).map(|k| (15.0 * k as f64, 2.0)).collect();
        let local = |c: &[(f64, f64)]| {
            parse_query_range(
                response(
                    "vllm:prompt_tokens_by_source_total",
                    ",\"source\":\"local_compute\"",
                    c,
                )
                .as_bytes(),
            )
            .unwrap()
        };
        let waiting =
            parse_query_range(response("vllm:num_requests_waiting", "", &w).as_bytes()).unwrap();
        let dep = |p: &str| (p == "p-0").then(|| "dep".to_string());
        let mut once = PromEstimator::default();
        once.push(local(&c));
        once.push(waiting.clone());
        let mut twice = once.clone();
        // The same response again, and one overlapping it by half.
        twice.push(local(&c));
        twice.push(local(&c[5..]));
        assert_eq!(twice.duplicates, 15);
        assert_eq!(twice.conflicting_samples(), 0);
        assert_eq!(twice.estimates(dep), once.estimates(dep));
        assert!(twice.conflicts(dep).is_empty());
        // Other values at the same times: the first read is used, and the
        // deployment is warned.
        let doubled: Vec<(f64, f64)> = c[8..].iter().map(|&(t, v)| (t, 2.0 * v)).collect();
        twice.push(local(&doubled));
        assert_eq!(twice.conflicting_samples(), 2);
        assert_eq!(twice.estimates(dep), once.estimates(dep));
        let warn = &twice.conflicts(dep)["dep"];
        assert!(
            warn.starts_with("2 Prometheus sample(s) were given twice with different values")
                && warn.contains("at 120: 120000 then 240000"),
            "{warn}"
        );
    }

    #[test]
    fn saturated_rate_with_a_counter_reset() {
        // 1000 tokens/s computed while 2 requests wait, 15 s scrapes; the
        // counter restarts at t = 90.
        let mut c = Vec::new();
        let mut w = Vec::new();
        let mut total = 0.0;
        for k in 0..12 {
            let t = 15.0 * k as f64;
            if k == 6 {
                total = 15_000.0;
            } else if k > 0 {
                total += 15_000.0;
            }
            c.push((t, total));
            w.push((t, if (1..11).contains(&k) { 2.0 } else { 0.0 }));
        }
        let mut est = PromEstimator::default();
        est.push(
            parse_query_range(
                response(
                    "vllm:prompt_tokens_by_source_total",
                    ",\"source\":\"local_compute\"",
                    &c,
                )
                .as_bytes(),
            )
            .unwrap(),
        );
        est.push(
            parse_query_range(response("vllm:num_requests_waiting", "", &w).as_bytes()).unwrap(),
        );
        let e = est.estimates(|p| (p == "p-0").then(|| "dep".to_string()));
        let p = &e["dep"];
        assert_eq!(p.source, PeakSource::Prometheus);
        assert!((p.value - 1000.0).abs() < 1e-6, "{}", p.value);
        assert_eq!(p.samples, 9);
        let [a, b] = p.interval.unwrap();
        assert!(a <= 1000.0 && 1000.0 <= b);
    }
}
