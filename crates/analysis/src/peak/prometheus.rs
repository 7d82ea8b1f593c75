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
    /// Samples dropped: a time or value outside its domain.
    pub dropped: u64,
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

/// Default of the most bytes of Prometheus responses one run reads, all
/// files together, after decompression (`recommend --max-prometheus-mib`):
/// 32 MiB, about 1.3 million samples (a day of 15 s samples of six queries
/// for about 35 engines). The samples are held for the estimate, about
/// 100 bytes each at the peak (read, pooled, per engine), so this bounds
/// the memory they take: about 130 MiB at the default.
pub const DEFAULT_MAX_PROMETHEUS_MIB: u64 = 32;

/// Reads one response. `Err` with the reason when it is not a successful
/// matrix response or a value is not a number. Samples whose time or
/// value is outside its domain ([`gatecal_parser::domain`]: a time before
/// 1970 or from 2100 on, a value that is NaN, infinite, negative or past
/// 2^53) are dropped and counted in [`PromSeries::dropped`].
pub fn parse_query_range(bytes: &[u8]) -> Result<Vec<PromSeries>, String> {
    read_query_range(bytes, u64::MAX, u64::MAX).map(|(s, _)| s)
}

/// [`parse_query_range`] from a stream, read once and never held whole:
/// each sample is read straight into its series; also returns the bytes
/// read. `Err` once the stream gives more than `left` bytes: the bound of
/// all responses together is `max_bytes` (named in the error, with the
/// flag that raises it).
pub fn read_query_range<R: std::io::Read>(
    r: R,
    left: u64,
    max_bytes: u64,
) -> Result<(Vec<PromSeries>, u64), String> {
    let n = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let mut counted = Counted {
        r,
        n: n.clone(),
        left,
    };
    let mut first = [0u8; 1];
    // The first byte past blanks tells a response from a bare matrix.
    let lead = loop {
        match std::io::Read::read(&mut counted, &mut first) {
            Ok(0) => return Err("not a Prometheus query_range response: empty".into()),
            Ok(_) if first[0].is_ascii_whitespace() => {}
            Ok(_) => break first[0],
            Err(_) if n.get() > left => return Err(too_big(max_bytes)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let chained = std::io::Read::chain(&first[..], counted);
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(64 << 10, chained));
    let fail = |e: serde_json::Error, what: &str| {
        if n.get() > left {
            too_big(max_bytes)
        } else {
            format!("{what}: {e}")
        }
    };
    let out = if lead == b'[' {
        let v = serde::de::DeserializeSeed::deserialize(SeriesList, &mut de)
            .map_err(|e| fail(e, "not a Prometheus matrix"))?;
        de.end().map_err(|e| fail(e, "not a Prometheus matrix"))?;
        v
    } else {
        let r = Response::deserialize(&mut de)
            .map_err(|e| fail(e, "not a Prometheus query_range response"))?;
        de.end()
            .map_err(|e| fail(e, "not a Prometheus query_range response"))?;
        if r.status.as_deref() != Some("success") {
            return Err(format!(
                "the response's status is {:?}{}",
                r.status.unwrap_or_default(),
                r.error.map(|e| format!(": {e}")).unwrap_or_default()
            ));
        }
        let d = r.data.ok_or("the response has no data")?;
        let result_type = d.result_type.unwrap_or_default();
        if result_type != "matrix" {
            return Err(format!(
                "resultType {result_type:?}: query_range answers a matrix (use query_range, not query)"
            ));
        }
        d.result.unwrap_or_default()
    };
    Ok((out, n.get()))
}

/// The error past the bound of `max_bytes`.
fn too_big(max_bytes: u64) -> String {
    format!(
        "more than {} MiB of Prometheus responses (after decompression): raise --max-prometheus-mib, or query a shorter range or a longer step",
        max_bytes >> 20
    )
}

/// A reader that counts the bytes through it, and fails once more than
/// `left` came.
struct Counted<R> {
    r: R,
    n: std::rc::Rc<std::cell::Cell<u64>>,
    left: u64,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.r.read(buf)?;
        self.n.set(self.n.get() + k as u64);
        if self.n.get() > self.left {
            return Err(std::io::Error::other("past the bound"));
        }
        Ok(k)
    }
}

/// `{"status", "data": {"resultType", "result"}, "error"}`, keys in any
/// order.
#[derive(Deserialize)]
struct Response {
    status: Option<String>,
    data: Option<Data>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: Option<String>,
    #[serde(default, deserialize_with = "series_list")]
    result: Option<Vec<PromSeries>>,
}

fn series_list<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<PromSeries>>, D::Error> {
    serde::de::DeserializeSeed::deserialize(SeriesList, d).map(Some)
}

/// A `result` array, each series read as it comes.
struct SeriesList;

impl<'de> serde::de::DeserializeSeed<'de> for SeriesList {
    type Value = Vec<PromSeries>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for SeriesList {
    type Value = Vec<PromSeries>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of series")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(s) = a.next_element_seed(OneSeries)? {
            out.push(s);
        }
        Ok(out)
    }
}

/// One series: `{"metric": {labels}, "values": [[t, "v"], …]}`.
struct OneSeries;

impl<'de> serde::de::DeserializeSeed<'de> for OneSeries {
    type Value = PromSeries;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<PromSeries, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for OneSeries {
    type Value = PromSeries;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a series object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<PromSeries, A::Error> {
        use serde::de::Error;
        let mut labels: Option<BTreeMap<String, String>> = None;
        let mut values: Option<Samples> = None;
        while let Some(k) = a.next_key::<std::borrow::Cow<'_, str>>()? {
            match k.as_ref() {
                "metric" => {
                    if labels.is_some() {
                        return Err(A::Error::duplicate_field("metric"));
                    }
                    labels = Some(a.next_value()?);
                }
                "values" => {
                    if values.is_some() {
                        return Err(A::Error::duplicate_field("values"));
                    }
                    values = Some(a.next_value_seed(SamplesSeed)?);
                }
                _ => {
                    a.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        let mut labels = labels.ok_or_else(|| A::Error::missing_field("metric"))?;
        let metric = labels.remove("__name__").unwrap_or_default();
        let v = values.unwrap_or_default();
        if let Some((t, text)) = v.not_a_number {
            return Err(A::Error::custom(format!(
                "{metric}: sample at {t} is not a number: {text:?}"
            )));
        }
        let mut samples = v.samples;
        samples.shrink_to_fit();
        samples.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(PromSeries {
            metric,
            labels,
            samples,
            dropped: v.dropped,
        })
    }
}

/// A series' samples as read: those in their domains, how many were not,
/// and the first value that is no number at all.
#[derive(Default)]
struct Samples {
    samples: Vec<(f64, f64)>,
    dropped: u64,
    not_a_number: Option<(f64, String)>,
}

struct SamplesSeed;

impl<'de> serde::de::DeserializeSeed<'de> for SamplesSeed {
    type Value = Samples;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Samples, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for SamplesSeed {
    type Value = Samples;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an array of [time, \"value\"] pairs")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Samples, A::Error> {
        use gatecal_parser::domain::{is_count, is_timestamp};
        let mut out = Samples::default();
        while let Some((t, v)) = a.next_element::<(f64, SampleValue)>()? {
            match v.0 {
                Ok(x) if is_timestamp(t) && is_count(x) => out.samples.push((t, x)),
                Ok(_) => out.dropped += 1,
                Err(text) => {
                    out.not_a_number.get_or_insert((t, text));
                }
            }
        }
        Ok(out)
    }
}

/// A sample's value: the string Prometheus writes (`"12"`, `"NaN"`,
/// `"+Inf"`), as a number, or the text when it is none.
struct SampleValue(Result<f64, String>);

impl<'de> Deserialize<'de> for SampleValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SampleValue, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = SampleValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sample value")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SampleValue, E> {
                Ok(SampleValue(v.parse::<f64>().map_err(|_| v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
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
    /// Samples dropped on reading: a time or value outside its domain
    /// (NaN, an infinity, a negative value, past 2^53).
    pub dropped: u64,
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
            self.dropped += s.dropped;
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
                    estimates: Vec::new(),
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

    /// Samples outside their domain (a value of 1e308, NaN, +Inf, a
    /// negative one, a time of year 9999) are dropped and counted, never
    /// read: one 1e308 counter sample would make a peak of about 1e304
    /// tok/s.
    #[test]
    fn samples_out_of_domain_are_dropped_and_counted() {
        let c: Vec<(f64, f64)> = (0..12)
            .map(|k| (15.0 * k as f64, 15_000.0 * k as f64))
            .collect();
        let w: Vec<(f64, f64)> = (0..12)
            .map(|k| {
                (
                    15.0 * k as f64,
                    if (1..11).contains(&k) { 2.0 } else { 0.0 },
                )
            })
            .collect();
        let local = response(
            "vllm:prompt_tokens_by_source_total",
            ",\"source\":\"local_compute\"",
            &c,
        )
        .replace("[45,\"45000\"]", "[45,\"1e308\"]");
        let waiting = response("vllm:num_requests_waiting", "", &w).replace(
            "[0,\"0\"]",
            "[0,\"NaN\"],[1,\"+Inf\"],[2,\"-5\"],[253402300000,\"1\"]",
        );
        let (local, waiting) = (
            parse_query_range(local.as_bytes()).unwrap(),
            parse_query_range(waiting.as_bytes()).unwrap(),
        );
        assert_eq!((local[0].dropped, local[0].samples.len()), (1, 11));
        assert_eq!((waiting[0].dropped, waiting[0].samples.len()), (4, 11));
        let mut est = PromEstimator::default();
        est.push(local);
        est.push(waiting);
        assert_eq!(est.dropped, 5);
        let dep = |p: &str| (p == "p-0").then(|| "dep".to_string());
        let got = est.estimates(dep)["dep"].value;
        // The same as without those samples at all.
        let mut without = PromEstimator::default();
        let c3: Vec<(f64, f64)> = c.iter().copied().filter(|s| s.0 != 45.0).collect();
        for r in [
            response(
                "vllm:prompt_tokens_by_source_total",
                ",\"source\":\"local_compute\"",
                &c3,
            ),
            response("vllm:num_requests_waiting", "", &w[1..]),
        ] {
            without.push(parse_query_range(r.as_bytes()).unwrap());
        }
        let want = without.estimates(dep)["dep"].value;
        assert_eq!(got, want);
        assert!(got > 500.0 && got < 2000.0, "{got}");
        // A value that is no number at all is an error naming the series.
        let e = parse_query_range(
            response("vllm:num_requests_waiting", "", &w)
                .replace("[0,\"0\"]", "[0,\"lots\"]")
                .as_bytes(),
        )
        .unwrap_err();
        assert!(
            e.contains("vllm:num_requests_waiting") && e.contains("lots"),
            "{e}"
        );
    }

    /// Responses are read streamed, and refused past the bound with the
    /// flag that raises it; the bytes read are counted across files.
    #[test]
    fn responses_past_the_bound_are_refused() {
        let w: Vec<(f64, f64)> = (0..200).map(|k| (15.0 * k as f64, 1.0)).collect();
        let r = response("vllm:num_requests_waiting", "", &w);
        let (s, n) = read_query_range(r.as_bytes(), r.len() as u64, 1 << 20).unwrap();
        assert_eq!((s[0].samples.len(), n), (200, r.len() as u64));
        let e = read_query_range(r.as_bytes(), r.len() as u64 - 1, 1 << 20).unwrap_err();
        assert_eq!(
            e,
            "more than 1 MiB of Prometheus responses (after decompression): raise --max-prometheus-mib, or query a shorter range or a longer step"
        );
        // A bare matrix too, in a slow reader that gives a byte at a time.
        struct Slow<'a>(&'a [u8]);
        impl std::io::Read for Slow<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let Some((&b, rest)) = self.0.split_first() else {
                    return Ok(0);
                };
                buf[0] = b;
                self.0 = rest;
                Ok(1)
            }
        }
        let bare =
            "  [{\"values\":[[2,\"3\"],[1,\"4\"]],\"metric\":{\"__name__\":\"x\",\"pod\":\"p\"}}]";
        let (s, _) = read_query_range(Slow(bare.as_bytes()), u64::MAX, u64::MAX).unwrap();
        assert_eq!(s[0].samples, vec![(1.0, 4.0), (2.0, 3.0)]);
        assert_eq!(s[0].metric, "x");
    }
}
