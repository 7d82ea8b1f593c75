//! Partial reports merge into the single run: random splits of fixtures and
//! simulator logs into shards, by time with a warm-up and by deployment,
//! each shard's partial written and read back as text, merged in a random
//! order.

use std::sync::OnceLock;

use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, GateDistReport, InputSummary,
    NO_PREDICTION_AFTER_MERGE, ParamSource, Partial, Recommend, RecommendOptions, RecommendPartial,
    RecommendReport, SourcedConfig, TimeRange, merge_partials, merge_recommend_partials,
};
use gatecal_parser::{ParseOptions, parse_slice};
use proptest::prelude::*;

/// The decisions of each source: fixtures and one run of every simulator
/// scenario.
fn sources() -> &'static Vec<(String, Vec<DecisionInput>)> {
    static S: OnceLock<Vec<(String, Vec<DecisionInput>)>> = OnceLock::new();
    S.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let mut logs: Vec<(String, Vec<u8>)> = [
            "glm-like/epp.log",
            "glm-like-v1/epp.log",
            "eight-deployments/epp.log",
            "pd-disagg/epp.log",
        ]
        .iter()
        .map(|f| (f.to_string(), std::fs::read(root.join(f)).unwrap()))
        .collect();
        for name in gatecal_sim::scenario_names() {
            let s = gatecal_sim::scenario(name).unwrap().with_requests(300);
            let out = gatecal_sim::run(&s, 7, &gatecal_sim::Variant::default());
            logs.push((format!("sim {name}"), out.epp_log));
        }
        logs.into_iter()
            .map(|(name, bytes)| {
                let parsed = parse_slice("epp.log", &bytes, &ParseOptions::default()).unwrap();
                let ds: Vec<DecisionInput> = parsed
                    .decisions()
                    .map(DecisionInput::from)
                    .filter(|d| d.ts.is_some_and(f64::is_finite))
                    .collect();
                (name, ds)
            })
            .collect()
    })
}

fn audit(ds: &[DecisionInput], range: TimeRange, configs: &ConfigSet) -> GateDist {
    let opts = GateDistOptions {
        time_range: range,
        window_s: Some(600.0),
        ..GateDistOptions::default()
    };
    let mut g = GateDist::new(opts, configs.clone());
    for d in ds {
        g.push(d.clone());
    }
    g
}

/// Written and read back, as `gate-dist merge` reads it.
fn round_trip(p: Partial) -> Partial {
    let line = p.to_line();
    assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
    Partial::from_json(&line).unwrap()
}

fn span(ds: &[DecisionInput]) -> (f64, f64) {
    let ts = ds.iter().filter_map(|d| d.ts);
    let first = ts.clone().fold(f64::INFINITY, f64::min).floor();
    let last = ts.fold(f64::NEG_INFINITY, f64::max).floor() + 1.0;
    (first, last)
}

/// A time between two decisions of one request (logged at different
/// times by one filter instance, as its scheduling profiles log them), to
/// cut a shard inside it; `None` when no request has such decisions.
fn inside_a_request(ds: &[DecisionInput], pick: usize) -> Option<f64> {
    type Span<'a> = (f64, f64, Option<&'a str>, bool);
    let mut spans: std::collections::BTreeMap<(&str, &str), Span> = Default::default();
    for d in ds {
        if let (Some(id), Some(t)) = (d.request_id.as_deref(), d.ts) {
            let f = d.filter.as_deref();
            let e = spans.entry((&d.deployment, id)).or_insert((t, t, f, true));
            e.0 = e.0.min(t);
            e.1 = e.1.max(t);
            e.3 &= e.2 == f;
        }
    }
    let apart: Vec<(f64, f64)> = spans
        .into_values()
        .filter(|s| s.1 > s.0 && s.3)
        .map(|s| (s.0, s.1))
        .collect();
    if apart.is_empty() {
        return None;
    }
    let (a, b) = apart[pick % apart.len()];
    Some(a + (b - a) / 2.0)
}

/// The time shards `[cuts[i], cuts[i+1])`, each fed its decisions from
/// `warm_up` seconds before its start.
fn time_partials(
    ds: &[DecisionInput],
    cuts: &[f64],
    warm_up: f64,
    configs: &ConfigSet,
) -> Vec<(String, Partial)> {
    cuts.windows(2)
        .enumerate()
        .map(|(i, w)| {
            let shard: Vec<DecisionInput> = ds
                .iter()
                .filter(|d| d.ts.is_some_and(|t| t >= w[0] - warm_up && t < w[1]))
                .cloned()
                .collect();
            let range = TimeRange {
                since: Some(w[0]),
                until: Some(w[1]),
            };
            let p = audit(&shard, range, configs).into_partial(InputSummary::default());
            (format!("shard{i}"), round_trip(p))
        })
        .collect()
}

fn merged(mut parts: Vec<(String, Partial)>, order: &[usize]) -> GateDistReport {
    let mut shuffled = Vec::new();
    for &i in order {
        if i < parts.len() {
            shuffled.push(i);
        }
    }
    let mut taken: Vec<Option<(String, Partial)>> = parts.drain(..).map(Some).collect();
    let mut out: Vec<(String, Partial)> =
        shuffled.iter().filter_map(|&i| taken[i].take()).collect();
    out.extend(taken.into_iter().flatten());
    merge_partials(out).unwrap().finish()
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap()
}

/// The configs in force a run over the whole log found, given to every
/// run as `--config` gives them: a shard whose lines never show the bar
/// would otherwise assume the default, and the merge refuse it.
fn given(ds: &[DecisionInput]) -> ConfigSet {
    let whole =
        audit(ds, TimeRange::default(), &ConfigSet::default()).finish(InputSummary::default());
    let mut set = ConfigSet::default();
    for d in whole.deployments {
        let c = SourcedConfig::new("file:epp.yaml", d.config.parameters, ParamSource::File);
        set.per_deployment.insert(d.name, vec![(String::new(), c)]);
    }
    set
}

/// The counts that are exact whatever the warm-up.
fn assert_counts_equal(what: &str, a: &GateDistReport, b: &GateDistReport) {
    assert_eq!(a.deployments.len(), b.deployments.len(), "{what}");
    for (x, y) in a.deployments.iter().zip(&b.deployments) {
        let (s, t) = (&x.stats, &y.stats);
        assert_eq!(x.name, y.name, "{what}");
        assert_eq!(s.decisions, t.decisions, "{what} {}", x.name);
        assert_eq!(s.outcomes, t.outcomes, "{what} {}", x.name);
        assert_eq!(s.evidence, t.evidence, "{what} {}", x.name);
        assert_eq!(s.released, t.released, "{what} {}", x.name);
        assert_eq!(
            s.gate_input_ms.count, t.gate_input_ms.count,
            "{what} {}",
            x.name
        );
        assert_eq!(
            json(&x.observed_ttft_ms),
            json(&y.observed_ttft_ms),
            "{what}"
        );
        // The documented bound on reconstructed inputs (docs/scale-out.md).
        if s.evidence.reconstructed >= 100 {
            for (m, q) in [
                (s.gate_input_ms.p50, t.gate_input_ms.p50),
                (s.gate_input_ms.p90, t.gate_input_ms.p90),
            ] {
                let (m, q) = (m.unwrap(), q.unwrap());
                assert!(
                    (m - q).abs() <= (0.25 * q.abs()).max(1_000.0),
                    "{what} {}: merged {m} ms against {q} ms",
                    x.name
                );
            }
        }
        // Without reconstructed decisions every gate input is exact.
        if s.evidence.reconstructed == 0 {
            assert_eq!(
                json(&s.gate_input_ms),
                json(&t.gate_input_ms),
                "{what} {}",
                x.name
            );
            assert_eq!(json(&s.what_if), json(&t.what_if), "{what} {}", x.name);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Time shards with a warm-up reaching back to the start of the log:
    /// the reconstruction is the single run's, so the whole report is
    /// (every deployment, the overall figures, the findings), whatever
    /// the merge order; with a short warm-up the counts are.
    #[test]
    fn time_shards_merge_into_the_single_run(
        src in 0usize..64,
        fractions in proptest::collection::vec(0.05f64..0.95, 1..5),
        order in proptest::collection::vec(0usize..6, 0..6),
        short_warm_up in 60.0f64..600.0,
        inside in any::<usize>(),
    ) {
        let all = sources();
        let (name, ds) = &all[src % all.len()];
        let (first, last) = span(ds);
        let mut cuts: Vec<f64> = fractions
            .iter()
            .map(|f| (first + (last - first) * f).floor())
            .collect();
        // One cut between two decisions of a request: its observed TTFT
        // still counts once.
        cuts.extend(inside_a_request(ds, inside));
        cuts.push(first);
        cuts.push(last);
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        let range = TimeRange { since: Some(first), until: Some(last) };
        let configs = given(ds);
        let single = audit(ds, range, &configs).finish(InputSummary::default());

        let full = merged(time_partials(ds, &cuts, f64::INFINITY, &configs), &order);
        prop_assert_eq!(json(&full.deployments), json(&single.deployments), "{}", name);
        prop_assert_eq!(json(&full.overall), json(&single.overall), "{}", name);
        prop_assert_eq!(json(&full.findings), json(&single.findings), "{}", name);
        prop_assert_eq!(full.merged.len(), cuts.len() - 1);

        // Any order gives the same bytes.
        let again = merged(time_partials(ds, &cuts, f64::INFINITY, &configs), &[]);
        prop_assert_eq!(json(&full), json(&again));

        let short = merged(time_partials(ds, &cuts, short_warm_up, &configs), &order);
        assert_counts_equal(name, &short, &single);
    }

    /// Shards by deployment (each deployment's decisions in its own run):
    /// the reconstruction is per deployment, so the merge is exact.
    #[test]
    fn deployment_shards_merge_into_the_single_run(
        src in 0usize..64,
        k in 2usize..5,
        order in proptest::collection::vec(0usize..5, 0..5),
    ) {
        let all = sources();
        let (name, ds) = &all[src % all.len()];
        let configs = ConfigSet::default();
        let single = audit(ds, TimeRange::default(), &configs).finish(InputSummary::default());
        let mut names: Vec<&str> = ds.iter().map(|d| d.deployment.as_str()).collect();
        names.sort();
        names.dedup();
        let parts: Vec<(String, Partial)> = (0..k)
            .map(|i| {
                let shard: Vec<DecisionInput> = ds
                    .iter()
                    .filter(|d| names.iter().position(|n| *n == d.deployment).unwrap_or(0) % k == i)
                    .cloned()
                    .collect();
                let p = audit(&shard, TimeRange::default(), &configs)
                    .into_partial(InputSummary::default());
                (format!("part{i}"), round_trip(p))
            })
            .collect();
        let m = merged(parts, &order);
        prop_assert_eq!(json(&m.deployments), json(&single.deployments), "{}", name);
        prop_assert_eq!(json(&m.overall), json(&single.overall), "{}", name);
    }
}

/// A cut between two decisions of one request, in every source that has
/// such a request: the merge counts its observed TTFT once, as the single
/// run does (every deployment's figures, per endpoint too).
#[test]
fn a_cut_inside_a_request_counts_its_ttft_once() {
    let mut tried = 0;
    for (name, ds) in sources() {
        let (first, last) = span(ds);
        let Some(cut) = inside_a_request(ds, 0) else {
            continue;
        };
        let configs = given(ds);
        let range = TimeRange {
            since: Some(first),
            until: Some(last),
        };
        let single = audit(ds, range, &configs).finish(InputSummary::default());
        let m = merged(
            time_partials(ds, &[first, cut, last], f64::INFINITY, &configs),
            &[1, 0],
        );
        for (x, y) in m.deployments.iter().zip(&single.deployments) {
            assert_eq!(
                json(&x.observed_ttft_ms),
                json(&y.observed_ttft_ms),
                "{name} {}",
                x.name
            );
        }
        assert_eq!(json(&m.deployments), json(&single.deployments), "{name}");
        if single.deployments.iter().any(|d| d.observed_ttft_ms.n > 0) {
            tried += 1;
        }
    }
    assert!(
        tried > 0,
        "no source has a request with an observed TTFT cut in two"
    );
}

/// A time between a request's decision by one filter instance and its
/// next decision by another (a filter chain: the latency-predictor
/// scenario's strict then loose filters): a shard cut there starts with
/// the second instance. `None` when no request has one.
fn inside_a_chain(ds: &[DecisionInput]) -> Option<f64> {
    let mut first: std::collections::HashMap<(&str, &str), (f64, Option<&str>)> =
        Default::default();
    for d in ds {
        let (Some(id), Some(t)) = (d.request_id.as_deref(), d.ts) else {
            continue;
        };
        match first.get(&(d.deployment.as_str(), id)) {
            None => {
                first.insert((&d.deployment, id), (t, d.filter.as_deref()));
            }
            Some(&(t0, f)) if f != d.filter.as_deref() && t > t0 => {
                return Some(t0 + (t - t0) / 2.0);
            }
            Some(_) => {}
        }
    }
    None
}

/// The filter instances of the deployment, in the order first seen.
fn instances(ds: &[DecisionInput]) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = Vec::new();
    for d in ds {
        let f = d.filter.as_deref().map(str::to_string);
        if !out.contains(&f) {
            out.push(f);
        }
    }
    out
}

/// A deployment with two filter instances of different configs, cut
/// inside a filter chain: the shard after the cut starts with the second
/// instance, so the config it shows first is the second instance's. The
/// merge compares the configs instance by instance, accepts the shards,
/// and gives the single run's report, in either order.
#[test]
fn a_cut_inside_a_filter_chain_merges_into_the_single_run() {
    let (name, ds) = sources()
        .iter()
        .find(|(n, _)| n == "sim latency-predictor")
        .expect("the latency-predictor scenario");
    assert_eq!(instances(ds).len(), 2, "two filter instances");
    let cut = inside_a_chain(ds).expect("a request decided by both instances");
    let (first, last) = span(ds);
    let configs = given(ds);
    let range = TimeRange {
        since: Some(first),
        until: Some(last),
    };
    let single = audit(ds, range, &configs).finish(InputSummary::default());
    // The second shard's first decision is the chain's second instance.
    let after = ds.iter().find(|d| d.ts.is_some_and(|t| t >= cut)).unwrap();
    assert_eq!(
        after.filter.as_deref(),
        instances(ds)[1].as_deref(),
        "{name}"
    );
    for order in [[0, 1], [1, 0]] {
        let parts = time_partials(ds, &[first, cut, last], f64::INFINITY, &configs);
        let m = merged(parts, &order);
        assert_eq!(json(&m.deployments), json(&single.deployments), "{name}");
        assert_eq!(json(&m.findings), json(&single.findings), "{name}");
    }
}

/// Two shards of a deployment with two filter instances, each starting
/// with the first instance, the second instance under another config in
/// one of them: refused, naming that instance (the first instance's
/// config alike in both is not enough).
#[test]
fn another_config_of_a_second_filter_instance_is_refused() {
    let (_, ds) = sources()
        .iter()
        .find(|(n, _)| n == "sim latency-predictor")
        .expect("the latency-predictor scenario");
    let second = instances(ds)[1].clone().expect("named instances");
    let (first, last) = span(ds);
    let mid = ((first + last) / 2.0).floor();
    let configs = given(ds);
    // The second instance given another exploration probability (a
    // parameter the log does not show) in the second shard only.
    let mut other = configs.clone();
    for list in other.per_deployment.values_mut() {
        let mut c = list[0].1.clone();
        c.parameters.exploration_probability = 0.25;
        list.push((second.clone(), c));
    }
    let mut parts = time_partials(ds, &[first, mid], f64::INFINITY, &configs);
    let later = time_partials(ds, &[mid, last], f64::INFINITY, &other);
    parts.push(("later".into(), later.into_iter().next().unwrap().1));
    let after = ds.iter().find(|d| d.ts.is_some_and(|t| t >= mid)).unwrap();
    assert_eq!(
        after.filter.as_deref(),
        instances(ds)[0].as_deref(),
        "starts with the first instance"
    );
    let e = merge_partials(parts).err().expect("another config refused");
    let e = e.to_string();
    assert!(e.contains("ran under another config"), "{e}");
    assert!(e.contains(&format!("filter instance {second}")), "{e}");
    assert!(e.contains("explorationProbability"), "{e}");
}

#[test]
fn the_same_decisions_twice_are_refused() {
    let (_, ds) = &sources()[0];
    let (first, last) = span(ds);
    let mid = ((first + last) / 2.0).floor();
    let configs = given(ds);
    let a = time_partials(ds, &[first, mid, last], 60.0, &configs);
    let b = time_partials(ds, &[first, mid], 60.0, &configs);
    let mut all = a;
    all.push(("again".into(), b.into_iter().next().unwrap().1));
    let e = merge_partials(all).err().expect("double counting refused");
    assert!(e.to_string().contains("counted twice"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A damaged partial (cut short, a byte changed) is read as an error
    /// or as a partial that merges and finishes: never a panic.
    #[test]
    fn damaged_partials_never_panic(cut in 0.0f64..1.0, at in 0.0f64..1.0, byte in any::<u8>()) {
        let (_, ds) = &sources()[1];
        let configs = ConfigSet::default();
        let line = audit(ds, TimeRange::default(), &configs)
            .into_partial(InputSummary::default())
            .to_line();
        let mut bytes = line.into_bytes();
        let i = ((bytes.len() - 1) as f64 * at) as usize;
        bytes[i] = byte;
        bytes.truncate(((bytes.len() as f64) * (0.5 + cut / 2.0)) as usize + 1);
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(p) = Partial::from_json(&text)
            && let Ok(m) = merge_partials(vec![("damaged".into(), p)])
        {
            let _ = serde_json::to_string(&m.finish());
        }
    }
}

/// Two EPP pods' logs without pod names, over the same time: files of one
/// pod each are two streams, named by their input, so not double counting,
/// and their counts add up; the same input counted twice over overlapping
/// times is refused, naming it, though no sampled key is shared; stdin
/// without a name is one stream, and the sampled keys decide.
#[test]
fn two_unnamed_pods_over_the_same_time_merge() {
    let (_, ds) = &sources()[4];
    let configs = given(ds);
    let halves = |source: &dyn Fn(usize) -> Option<String>| -> Vec<(String, Partial)> {
        (0..2)
            .map(|h| {
                let half: Vec<DecisionInput> = ds
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % 2 == h)
                    .map(|(_, d)| DecisionInput {
                        epp_pod: None,
                        unnamed_source: source(h).map(Into::into),
                        ..d.clone()
                    })
                    .collect();
                let p = audit(&half, TimeRange::default(), &configs)
                    .into_partial(InputSummary::default());
                (format!("pod{h}"), round_trip(p))
            })
            .collect()
    };
    let parts = halves(&|h| Some(format!("pods/epp-{h}.log")));
    let sampled: usize = parts.iter().map(|(_, p)| p.parts[0].sampled.len()).sum();
    assert!(sampled > 0, "the keys are kept");
    for (_, p) in &parts {
        let streams: Vec<&String> = p.parts[0].streams.keys().collect();
        assert!(
            streams.iter().all(|s| s.contains("/input:pods/epp-")),
            "{streams:?}"
        );
    }
    let m = merge_partials(parts).expect("two pods merge").finish();
    let n: u64 = m.deployments.iter().map(|d| d.stats.decisions).sum();
    assert_eq!(n, ds.len() as u64);

    let e = merge_partials(halves(&|_| Some("epp.log".into())))
        .err()
        .expect("one input counted twice");
    assert!(e.to_string().contains("read from epp.log"), "{e}");
    assert!(e.to_string().contains("counted twice"), "{e}");

    let m = merge_partials(halves(&|_| None)).expect("stdin: the keys decide");
    assert_eq!(m.decisions(), ds.len() as u64);
}

// Recommend's partials.

/// A simulator scenario's decisions and vLLM stats lines (with the
/// decision records, so that matched tokens and routed requests are
/// known): the calibration's input.
fn recommend_source(name: &str) -> (Vec<DecisionInput>, Vec<gatecal_parser::VllmStats>) {
    let s = gatecal_sim::scenario(name).unwrap().with_requests(400);
    let out = gatecal_sim::run(&s, 11, &gatecal_sim::Variant::default());
    let parsed = parse_slice("epp.log", &out.epp_log, &ParseOptions::default()).unwrap();
    let ds: Vec<DecisionInput> = parsed
        .decisions()
        .map(DecisionInput::from)
        .filter(|d| d.ts.is_some_and(f64::is_finite))
        .collect();
    let mut stats = Vec::new();
    for (pod, bytes) in &out.vllm_logs {
        let p = parse_slice(&format!("vllm/{pod}.log"), bytes, &ParseOptions::default()).unwrap();
        stats.extend(p.vllm_stats().cloned());
    }
    (ds, stats)
}

/// A source's name, decisions and stats lines.
type RecommendSource = (String, Vec<DecisionInput>, Vec<gatecal_parser::VllmStats>);

fn recommend_sources() -> &'static Vec<RecommendSource> {
    static S: OnceLock<Vec<RecommendSource>> = OnceLock::new();
    S.get_or_init(|| {
        ["glm-like-v1", "eight-deployments", "balanced"]
            .iter()
            .map(|n| {
                let (ds, st) = recommend_source(n);
                (n.to_string(), ds, st)
            })
            .collect()
    })
}

fn calibrate(
    ds: &[DecisionInput],
    stats: &[gatecal_parser::VllmStats],
    range: TimeRange,
    configs: &ConfigSet,
) -> Recommend {
    let opts = RecommendOptions {
        time_range: range,
        window_s: Some(600.0),
        ..RecommendOptions::default()
    };
    let mut r = Recommend::new(opts, configs.clone());
    for d in ds {
        r.push_decision(d.clone());
    }
    for s in stats {
        r.push_vllm(s);
    }
    r
}

fn recommend_round_trip(p: RecommendPartial) -> RecommendPartial {
    let line = p.to_line();
    assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
    RecommendPartial::from_json(&line).unwrap()
}

/// Recommend's time shards, each given every stats line (as every shard
/// of a fleet job is given the vLLM logs).
fn recommend_time_partials(
    ds: &[DecisionInput],
    stats: &[gatecal_parser::VllmStats],
    cuts: &[f64],
    configs: &ConfigSet,
) -> Vec<(String, RecommendPartial)> {
    cuts.windows(2)
        .enumerate()
        .map(|(i, w)| {
            let shard: Vec<DecisionInput> = ds
                .iter()
                .filter(|d| d.ts.is_some_and(|t| t < w[1]))
                .cloned()
                .collect();
            let range = TimeRange {
                since: Some(w[0]),
                until: Some(w[1]),
            };
            let p = calibrate(&shard, stats, range, configs)
                .into_partial(InputSummary::default())
                .unwrap();
            (format!("shard{i}"), recommend_round_trip(p))
        })
        .collect()
}

fn in_order<T>(mut parts: Vec<(String, T)>, order: &[usize]) -> Vec<(String, T)> {
    let n = parts.len();
    let mut idx: Vec<usize> = order.iter().copied().filter(|i| *i < n).collect();
    idx.dedup();
    let mut taken: Vec<Option<(String, T)>> = parts.drain(..).map(Some).collect();
    let mut out: Vec<(String, T)> = idx.iter().filter_map(|&i| taken[i].take()).collect();
    out.extend(taken.into_iter().flatten());
    out
}

/// The report but for the list of partials merged (which a run over logs
/// does not have).
fn report_json(r: &RecommendReport) -> String {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("merged");
    v.to_string()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    /// Recommend's time shards with a warm-up from the start, every shard
    /// given every vLLM stats line: the merge, in any order, is the
    /// partial of one run over everything byte for byte, and its report
    /// is the single run's, the predicted TTFT of every row included.
    #[test]
    fn recommend_time_shards_merge_into_the_single_run(
        src in 0usize..3,
        fractions in proptest::collection::vec(0.05f64..0.95, 1..4),
        order in proptest::collection::vec(0usize..5, 0..5),
        inside in any::<usize>(),
    ) {
        let all = recommend_sources();
        let (name, ds, stats) = &all[src % all.len()];
        let (first, last) = span(ds);
        let mut cuts: Vec<f64> = fractions
            .iter()
            .map(|f| (first + (last - first) * f).floor())
            .collect();
        cuts.extend(inside_a_request(ds, inside));
        cuts.push(first);
        cuts.push(last);
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        let range = TimeRange { since: Some(first), until: Some(last) };
        let configs = given(ds);
        let single = calibrate(ds, stats, range, &configs).finish(InputSummary::default());
        let one = recommend_round_trip(
            calibrate(ds, stats, range, &configs)
                .into_partial(InputSummary::default())
                .unwrap(),
        );
        let one = merge_recommend_partials(vec![("all".into(), one)])
            .unwrap()
            .finish()
            .unwrap();

        let parts = recommend_time_partials(ds, stats, &cuts, &configs);
        let m = merge_recommend_partials(in_order(parts, &order)).unwrap();
        let line = m.to_line();
        let report = m.finish().unwrap();
        prop_assert_eq!(report.merged.len(), cuts.len() - 1);
        prop_assert_eq!(json(&report.deployments), json(&one.deployments), "{}", name);
        prop_assert_eq!(json(&report.findings), json(&one.findings), "{}", name);
        prop_assert_eq!(report_json(&report), report_json(&single), "{}", name);
        let predicted = report
            .deployments
            .iter()
            .filter(|d| d.rows.iter().any(|r| r.predicted_ttft_ms.is_some()))
            .count();
        // (The eight deployments' 400 requests are too few for a fit.)
        prop_assert!(predicted > 0 || name == "eight-deployments", "{}: nothing predicted", name);
        for d in &report.deployments {
            prop_assert!(
                !d.warnings.iter().any(|w| w == NO_PREDICTION_AFTER_MERGE),
                "{:?}",
                d.warnings
            );
        }

        // Any order and grouping: the same bytes.
        let parts = recommend_time_partials(ds, stats, &cuts, &configs);
        let mut rev = in_order(parts, &[]);
        rev.reverse();
        let tail = rev.split_off(rev.len().div_ceil(2));
        if tail.is_empty() {
            return Ok(());
        }
        let left = merge_recommend_partials(rev).unwrap();
        let right = merge_recommend_partials(tail).unwrap();
        let regrouped = merge_recommend_partials(vec![
            ("right".into(), recommend_round_trip(right)),
            ("left".into(), recommend_round_trip(left)),
        ])
        .unwrap();
        prop_assert_eq!(regrouped.to_line(), line);
    }
}

/// A partial of an earlier version (no `replay` block) still merges: the
/// report says it has no predicted TTFT, and chooses by excess TTFT.
#[test]
fn partials_without_the_requests_merge_without_predictions() {
    let all = recommend_sources();
    let (_, ds, stats) = &all[0];
    let (first, last) = span(ds);
    let mid = ((first + last) / 2.0).floor();
    let configs = given(ds);
    let mut parts = recommend_time_partials(ds, stats, &[first, mid, last], &configs);
    let copy: Vec<(String, RecommendPartial)> = parts
        .iter()
        .map(|(n, p)| {
            (
                n.clone(),
                RecommendPartial::from_json(&p.to_line()).unwrap(),
            )
        })
        .collect();
    let full = merge_recommend_partials(copy).unwrap().finish().unwrap();
    assert!(
        full.deployments[0]
            .rows
            .iter()
            .any(|r| r.predicted_ttft_ms.is_some())
    );
    let mut v: serde_json::Value = serde_json::from_str(&parts[1].1.to_line()).unwrap();
    for d in v["parts"][0]["deployments"]
        .as_object_mut()
        .unwrap()
        .values_mut()
    {
        assert!(d.as_object_mut().unwrap().remove("replay").is_some());
    }
    parts[1].1 = RecommendPartial::from_json(&v.to_string()).unwrap();
    let r = merge_recommend_partials(parts).unwrap().finish().unwrap();
    let d = &r.deployments[0];
    assert!(d.rows.iter().all(|r| r.predicted_ttft_ms.is_none()));
    assert!(
        d.warnings.iter().any(|w| w == NO_PREDICTION_AFTER_MERGE),
        "{:?}",
        d.warnings
    );
    assert_eq!(d.current.decisions, full.deployments[0].current.decisions);
}

#[test]
fn recommend_partials_refuse_what_does_not_merge() {
    let (_, ds, stats) = &recommend_sources()[0];
    let (first, last) = span(ds);
    let mid = ((first + last) / 2.0).floor();
    let configs = given(ds);
    // The same decisions twice.
    let mut parts = recommend_time_partials(ds, stats, &[first, mid, last], &configs);
    let again = recommend_time_partials(ds, stats, &[first, mid], &configs);
    parts.push(("again".into(), again.into_iter().next().unwrap().1));
    let e = merge_recommend_partials(parts)
        .err()
        .expect("double counting refused");
    assert!(e.to_string().contains("again"), "{e}");
    assert!(e.to_string().contains("counted twice"), "{e}");
    // Other options.
    let a = calibrate(
        ds,
        stats,
        TimeRange {
            since: Some(first),
            until: Some(mid),
        },
        &configs,
    )
    .into_partial(InputSummary::default())
    .unwrap();
    let mut r = Recommend::new(
        RecommendOptions {
            user_peak: Some(9000.0),
            ..RecommendOptions::default()
        },
        configs.clone(),
    );
    for d in ds.iter().filter(|d| d.ts.is_some_and(|t| t >= mid)) {
        r.push_decision(d.clone());
    }
    let b = r.into_partial(InputSummary::default()).unwrap();
    let e = merge_recommend_partials(vec![("a.part".into(), a), ("b.part".into(), b)])
        .err()
        .expect("other options refused");
    assert!(e.to_string().contains("other options"), "{e}");
    assert!(e.to_string().contains("known_peak"), "{e}");
    // Another config in force.
    let lo = calibrate(
        ds,
        stats,
        TimeRange {
            since: Some(first),
            until: Some(mid),
        },
        &configs,
    )
    .into_partial(InputSummary::default())
    .unwrap();
    let mut other = configs.clone();
    for v in other.per_deployment.values_mut() {
        for (_, c) in v.iter_mut() {
            c.parameters.max_in_flight_requests_delta += 7;
        }
    }
    let hi = calibrate(
        ds,
        stats,
        TimeRange {
            since: Some(mid),
            until: Some(last),
        },
        &other,
    )
    .into_partial(InputSummary::default())
    .unwrap();
    let e = merge_recommend_partials(vec![("lo.part".into(), lo), ("hi.part".into(), hi)])
        .err()
        .expect("another config refused");
    assert!(e.to_string().contains("another config"), "{e}");
    // A gate-dist partial, and the reverse.
    let g = audit(ds, TimeRange::default(), &configs)
        .into_partial(InputSummary::default())
        .to_line();
    let e = RecommendPartial::from_json(&g).err().unwrap();
    assert!(e.contains("not of recommend"), "{e}");
    let r = calibrate(ds, stats, TimeRange::default(), &configs)
        .into_partial(InputSummary::default())
        .unwrap()
        .to_line();
    let e = Partial::from_json(&r).err().unwrap();
    assert!(e.contains("not of gate-dist"), "{e}");
    // Cut short, and another version.
    let e = RecommendPartial::from_json(&r[..r.len() / 2])
        .err()
        .unwrap();
    assert!(e.contains("cut short"), "{e}");
    // Wherever the cut falls, a number's decimal point included.
    let points = r.char_indices().map(|(i, _)| i).filter(|&i| i > 0);
    let mut after_point = 0;
    let points = points.step_by(r.len() / 300 + 1);
    for i in points.chain(r.match_indices('.').map(|(i, _)| i + 1).take(300)) {
        if i >= r.trim_end().len() {
            continue;
        }
        after_point += usize::from(r.as_bytes()[i - 1] == b'.');
        let e = RecommendPartial::from_json(&r[..i]).err().unwrap();
        assert!(e.contains("cut short"), "cut at {i}: {e}");
    }
    assert!(after_point > 0);
    let v2 = r.replacen("gatecal.partial/v1", "gatecal.partial/v2", 1);
    let e = RecommendPartial::from_json(&v2).err().unwrap();
    assert!(e.contains("schema \"gatecal.partial/v2\""), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// A damaged recommend partial is an error or finishes: never a panic.
    #[test]
    fn damaged_recommend_partials_never_panic(cut in 0.0f64..1.0, at in 0.0f64..1.0, byte in any::<u8>()) {
        static LINE: OnceLock<String> = OnceLock::new();
        let line = LINE.get_or_init(|| {
            let (_, ds, stats) = &recommend_sources()[0];
            calibrate(ds, stats, TimeRange::default(), &ConfigSet::default())
                .into_partial(InputSummary::default())
                .unwrap()
                .to_line()
        });
        let mut bytes = line.clone().into_bytes();
        let i = ((bytes.len() - 1) as f64 * at) as usize;
        bytes[i] = byte;
        bytes.truncate(((bytes.len() as f64) * (0.5 + cut / 2.0)) as usize + 1);
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(p) = RecommendPartial::from_json(&text)
            && let Ok(m) = merge_recommend_partials(vec![("damaged".into(), p)])
        {
            let _ = m.finish().map(|r| serde_json::to_string(&r));
        }
    }
}
