//! The replay of the config in force against the simulator's truth,
//! request by request: where the self-check's error comes from.
//!
//! For a scenario and seed (users that wait, as `just accuracy` runs it),
//! the simulator runs under the config in force; the workload is inferred
//! and the engine fitted from its `-v=4` log, and the config in force is
//! replayed with the logged arrivals. Each replayed request is set beside its truth record: the endpoint
//! (the same as the log's or not), the filter's outcome, the TTFT, and the
//! in-flight tokens the replay saw on the endpoint the log chose against
//! those the log shows (`tokenLoad` less the request's uncached tokens).
//!
//!     cargo run --release -p gatecal-analysis --example replay_diff -- \
//!         [SCENARIO] [SEED] [--open-slots] [--show N] [--candidate LABEL] \
//!         [--replay-cache TOKENS] [--no-decode-share]
//!
//! The replay here routes by itself (not anchored to the log, as the
//! prediction is), to show where and why its own routing departs from the
//! log's. Prints the TTFT quantiles of the truth, that replay, the `current`
//! row (the config in force anchored to the log: the logged routing
//! throughout), and the replay over the requests it routed as the log did;
//! the share routed as the log did and its first departures with what each
//! side saw. A departure is
//! `primary` when the 20 requests before it were all routed as logged (its
//! cause is local: the state the replay built so far), `secondary`
//! otherwise.
//!
//! `--candidate LABEL` (`bar-low`, `bar-high`, `matched`, `peak`, as `just
//! accuracy` builds them) compares instead the candidate's prediction (its
//! replay anchored to the log, as the `recommend` row's) with
//! the simulator's paired run under it, request by request: the TTFT
//! quantiles, the uncached tokens each side served (the truth's from the
//! prefix match on the endpoint it chose), and the requests one side served
//! from a prefix cache the other did not (half the prompt or more apart),
//! the share each side served in under a second and its split between
//! endpoints.
//! `--replay-cache TOKENS` bounds the replay's prefix cache per endpoint;
//! `--no-decode-share` fits the engine without the decode share of its
//! steps.

use std::collections::{HashMap, HashSet};

use gatecal_analysis::DecisionInput;
use gatecal_analysis::predict::replay::{
    Arrivals, EngineModel, Picker, replay_anchored, replay_logged_with,
};
use gatecal_analysis::predict::{
    infer_and_fit_with, is_prefill_profile, nearest_rank, requests_by_deployment,
};
use gatecal_parser::{ParseOptions, parse_slice};
use gatecal_sim::{TruthRecord, Variant, run, scenario};

mod common;

fn quantiles(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    let q = |x| nearest_rank(&v, x).unwrap_or(f64::NAN);
    format!(
        "p50 {:.0}  p90 {:.0}  p99 {:.0} ms (n {})",
        q(0.5),
        q(0.9),
        q(0.99),
        v.len()
    )
}

fn main() {
    let mut name = "glm-like".to_string();
    let mut seed = 5u64;
    let mut users = true;
    let mut show = 12usize;
    let mut candidate: Option<String> = None;
    let mut replay_cache = f64::INFINITY;
    let mut decode_share = true;
    let mut args = std::env::args().skip(1);
    let mut positional = 0;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--open-slots" => users = false,
            "--show" => show = args.next().and_then(|v| v.parse().ok()).unwrap_or(show),
            "--candidate" => candidate = args.next(),
            "--no-decode-share" => decode_share = false,
            "--replay-cache" => {
                replay_cache = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(replay_cache)
            }
            _ if positional == 0 => {
                name = a;
                positional += 1;
            }
            _ => {
                seed = a.parse().unwrap_or(seed);
                positional += 1;
            }
        }
    }
    if let Some(label) = candidate.as_deref().filter(|l| !common::LABELS.contains(l)) {
        eprintln!(
            "unknown candidate {label} (one of {})",
            common::LABELS.join(", ")
        );
        std::process::exit(2);
    }
    let Some(base) = scenario(&name) else {
        eprintln!("unknown scenario {name}");
        std::process::exit(2);
    };
    let base = if users { base.with_users() } else { base };
    let out = run(&base, seed, &Variant::default());
    let parsed = match parse_slice("epp.log", &out.epp_log, &ParseOptions::default()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{name} seed {seed}: {e}");
            std::process::exit(1);
        }
    };
    let inputs: Vec<DecisionInput> = parsed.decisions().map(DecisionInput::from).collect();
    let per_dep = requests_by_deployment(&inputs);
    // The request ids in the order `requests_by_deployment` keeps them.
    let mut order: Vec<&DecisionInput> = inputs.iter().collect();
    let at = |d: &DecisionInput| d.arrival_ts.or(d.ts).unwrap_or(f64::NAN);
    order.sort_by(|a, b| at(a).total_cmp(&at(b)));
    let truth: HashMap<&str, &TruthRecord> = out
        .truth
        .iter()
        .rev()
        .map(|t| (t.request_id.as_str(), t))
        .collect();
    for dep in &base.deployments {
        let Some(seen) = per_dep.get(&dep.name) else {
            continue;
        };
        let mut ids_seen = HashSet::new();
        let ids: Vec<&str> = order
            .iter()
            .filter(|d| d.deployment == dep.name && !is_prefill_profile(d))
            .filter(|d| d.chosen.is_some() && at(d).is_finite())
            .filter_map(|d| d.request_id.as_deref())
            .filter(|id| ids_seen.insert(*id))
            .collect();
        if ids.len() != seen.len() {
            eprintln!(
                "{}: {} ids for {} requests; skipped",
                dep.name,
                ids.len(),
                seen.len()
            );
            continue;
        }
        let pool = &dep.pools[0];
        let Some(config) = pool.filters.last().map(|f| f.config.clone()) else {
            continue;
        };
        let start = EngineModel::unfitted(pool.true_peak_tps, dep.block_size);
        let (w, fit) =
            infer_and_fit_with(seen, &[], config.affinity_threshold, &start, decode_share);
        let Some(fit) = fit else {
            eprintln!("{}: no engine fit", dep.name);
            continue;
        };
        let mut model = fit.model(&start);
        model.cache_capacity_tokens = replay_cache;
        if let Some(label) = &candidate {
            let effective = common::effective_peak(&out, &dep.name, pool.true_peak_tps);
            let c = common::candidate(label, &config, effective);
            let mut s = base.clone();
            for (k, v) in [
                ("maxTTFTPenaltyMs", c.max_ttft_penalty_ms.to_string()),
                (
                    "peakPrefillThroughput",
                    c.peak_prefill_throughput.to_string(),
                ),
                ("penaltyMode", c.penalty_mode.as_str().to_string()),
            ] {
                if let Err(e) = s.set_filter_param(Some(&dep.name), k, &v) {
                    eprintln!("{}: {label} is not a valid config: {e}", dep.name);
                    std::process::exit(2);
                }
            }
            let paired = run(&s, seed, &Variant::default()).truth;
            compare_candidate(&dep.name, dep.block_size, &ids, &w.requests, &paired, {
                let n = w.endpoints.len();
                let base_run = replay_anchored(
                    &w.requests,
                    n,
                    &config,
                    &config,
                    &Picker::default(),
                    &model,
                    Arrivals::Logged,
                    None,
                );
                let first = base_run.first_tokens();
                replay_anchored(
                    &w.requests,
                    n,
                    &c,
                    &config,
                    &Picker::default(),
                    &model,
                    Arrivals::Shifted(&first),
                    None,
                )
            });
            continue;
        }
        println!(
            "{name} seed {seed} {}: {} requests; engine {:.0} tok/s (true {:.0}; prompt tokens drain at {:.0}), {:.1} ms a request, {:.1} ms latency, {:.2} s decoding after the first token",
            dep.name,
            w.requests.len(),
            fit.tokens_per_s,
            pool.true_peak_tps,
            fit.effective_tokens_per_s,
            fit.overhead_s * 1000.0,
            fit.latency_s * 1000.0,
            fit.decode_s
        );
        let r = replay_logged_with(
            &w.requests,
            w.endpoints.len(),
            &config,
            &Picker::default(),
            &model,
            Arrivals::Logged,
        );
        let mut truth_ttft = Vec::new();
        let mut replay_ttft = Vec::new();
        let mut same_truth = Vec::new();
        let mut same_replay = Vec::new();
        let mut same = 0usize;
        let mut streak = 0usize;
        let mut primary = 0usize;
        let mut outcome_flips = 0usize;
        let mut shown = 0usize;
        let mut inflight_err: Vec<f64> = Vec::new();
        for (i, (id, s)) in ids.iter().zip(seen).enumerate() {
            let (Some(t), Some(sv)) = (truth.get(id), r.served[i]) else {
                continue;
            };
            truth_ttft.push(t.ttft_ms);
            replay_ttft.push(sv.ttft_s * 1000.0);
            let logged = w.logged_endpoint[i];
            // The in-flight tokens on the logged endpoint: the replay's
            // (its load less the request's uncached tokens there) and the
            // log's (the same from the logged load).
            let replay_load = r.loads[i].iter().find(|&&(k, _)| k == logged).map(|l| l.1);
            let logged_load = s
                .loads
                .iter()
                .find(|(n, _)| *n == w.endpoints[logged])
                .map(|l| l.1);
            if let (Some(a), Some(b)) = (replay_load, logged_load) {
                inflight_err.push(a - b);
            }
            if sv.endpoint == logged {
                same += 1;
                streak += 1;
                same_truth.push(t.ttft_ms);
                same_replay.push(sv.ttft_s * 1000.0);
                continue;
            }
            let flip = Some(sv.outcome) != s.outcome;
            if flip {
                outcome_flips += 1;
            }
            let is_primary = streak >= 20;
            if is_primary {
                primary += 1;
            }
            if is_primary && shown < show {
                shown += 1;
                let fmt = |v: &[(usize, f64)]| {
                    v.iter()
                        .map(|&(k, l)| format!("{k}:{l:.0}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                let logged_loads: Vec<(usize, f64)> = s
                    .loads
                    .iter()
                    .filter_map(|(n, l)| Some((w.endpoints.iter().position(|e| e == n)?, *l)))
                    .collect();
                println!(
                    "  #{i} t={:.1}s logged ep {logged} ({:?}) replay ep {} ({:?}); loads logged [{}] replay [{}]; uncached warm {:.0} cold {:.0}; holders {:?}",
                    w.requests[i].arrival_s - w.requests[0].arrival_s,
                    s.outcome,
                    sv.endpoint,
                    sv.outcome,
                    fmt(&logged_loads),
                    fmt(&r.loads[i]),
                    w.requests[i].warm_tokens,
                    w.requests[i].cold_tokens,
                    w.requests[i].holders,
                );
                // The requests in flight on the logged endpoint whose
                // uncached tokens the replay counts unlike the log.
                let t_i = w.requests[i].arrival_s;
                for (j, sj) in r.served[..i].iter().enumerate() {
                    let Some(sj) = sj else { continue };
                    let rep_first = sj.arrival_s + sj.ttft_s;
                    if sj.endpoint != logged || rep_first <= t_i || sj.arrival_s > t_i {
                        continue;
                    }
                    let u = w.requests[j].prompt_tokens - sj.cached_tokens;
                    if (u - w.logged_uncached[j]).abs() > 0.5 {
                        println!(
                            "      #{j} in flight on ep {logged}: uncached replay {u:.0}, log {:.0} (logged ep {}, {:?}; holders {:?})",
                            w.logged_uncached[j],
                            w.logged_endpoint[j],
                            seen[j].outcome,
                            w.requests[j].holders,
                        );
                    }
                }
                // The requests whose tokens one side still counted in
                // flight and the other did not: their first tokens.
                for j in 0..i {
                    let Some(sj) = r.served[j] else { continue };
                    let (Some(obs), rep) = (w.observed_first_s[j], sj.arrival_s + sj.ttft_s) else {
                        continue;
                    };
                    if (obs > t_i) != (rep > t_i) {
                        println!(
                            "      #{j} on ep {} (logged {}): first token replay {:+.3} s, observed {:+.3} s from the decision (replay − observed {:+.3} s); uncached {:.0}",
                            sj.endpoint,
                            w.logged_endpoint[j],
                            rep - t_i,
                            obs - t_i,
                            rep - obs,
                            w.logged_uncached[j],
                        );
                    }
                }
            }
            streak = 0;
        }
        let n = truth_ttft.len();
        // The `current` row: the config in force anchored to the log (it
        // never departs from it), against the free replay above.
        let anchored = |a: Arrivals<'_>| {
            replay_anchored(
                &w.requests,
                w.endpoints.len(),
                &config,
                &config,
                &Picker::default(),
                &model,
                a,
                None,
            )
        };
        let first = anchored(Arrivals::Logged).first_tokens();
        let current = anchored(Arrivals::Shifted(&first));
        println!("  truth:  {}", quantiles(truth_ttft));
        println!("  replay: {}", quantiles(replay_ttft));
        println!("  current row: {}", quantiles(current.ttfts_ms()));
        println!(
            "  routed as logged: {same} of {n} ({:.1} %); departures {} ({primary} primary, {outcome_flips} with another filter outcome)",
            same as f64 * 100.0 / n.max(1) as f64,
            n - same
        );
        println!(
            "  those routed as logged, truth:  {}",
            quantiles(same_truth)
        );
        println!(
            "  those routed as logged, replay: {}",
            quantiles(same_replay)
        );
        inflight_err.sort_by(f64::total_cmp);
        let abs: Vec<f64> = {
            let mut a: Vec<f64> = inflight_err.iter().map(|x| x.abs()).collect();
            a.sort_by(f64::total_cmp);
            a
        };
        println!(
            "  load on the logged endpoint, replay − log: median |Δ| {:.0} tokens, p90 |Δ| {:.0}, exact in {:.1} %",
            nearest_rank(&abs, 0.5).unwrap_or(f64::NAN),
            nearest_rank(&abs, 0.9).unwrap_or(f64::NAN),
            abs.iter().filter(|x| **x < 0.5).count() as f64 * 100.0 / abs.len().max(1) as f64
        );
    }
}

/// The candidate's replay against its paired run, request by request.
fn compare_candidate(
    dep: &str,
    block_size: i64,
    ids: &[&str],
    requests: &[gatecal_analysis::predict::replay::Request],
    paired: &[TruthRecord],
    r: gatecal_analysis::predict::replay::Replay,
) {
    let truth: HashMap<&str, &TruthRecord> = paired
        .iter()
        .filter(|t| t.deployment == dep)
        .map(|t| (t.request_id.as_str(), t))
        .collect();
    let mut truth_ttft = Vec::new();
    let mut replay_ttft = Vec::new();
    let (mut truth_u, mut replay_u, mut both) = (0.0, 0.0, 0usize);
    // Served warm by one side only (half the prompt or more apart).
    let (mut colder_in_truth, mut colder_in_replay) = (0usize, 0usize);
    let (mut held_nowhere, mut held_nowhere_later_turn) = (0usize, 0usize);
    let mut off_holder: std::collections::BTreeMap<(bool, bool), usize> = Default::default();
    let (mut colder_truth_tokens, mut colder_replay_tokens) = (0.0, 0.0);
    let mut colder_truth_ttft = Vec::new();
    let mut colder_truth_replay_ttft = Vec::new();
    // The filter's outcomes on each side.
    let mut outcomes: std::collections::BTreeMap<(String, String), usize> = Default::default();
    // Requests per endpoint on each side.
    let mut truth_split: HashMap<&str, usize> = HashMap::new();
    let mut replay_split: HashMap<usize, usize> = HashMap::new();
    for (i, id) in ids.iter().enumerate() {
        let (Some(t), Some(s)) = (truth.get(id), r.served[i]) else {
            continue;
        };
        *truth_split.entry(t.chosen_endpoint.as_str()).or_default() += 1;
        *replay_split.entry(s.endpoint).or_default() += 1;
        *outcomes
            .entry((t.outcome.clone(), s.outcome.as_str().to_string()))
            .or_default() += 1;
        both += 1;
        truth_ttft.push(t.ttft_ms);
        replay_ttft.push(s.ttft_s * 1000.0);
        let prompt = t.prompt_tokens as f64;
        let matched = t
            .candidates
            .iter()
            .find(|c| c.endpoint == t.chosen_endpoint)
            .and_then(|c| c.match_blocks)
            .unwrap_or(0) as f64
            * block_size as f64;
        let tu = (prompt - matched.min(prompt)).max(0.0);
        let ru = (requests[i].prompt_tokens - s.cached_tokens).max(0.0);
        truth_u += tu;
        replay_u += ru;
        if tu - ru >= 0.5 * prompt {
            // Held nowhere in the truth: its session was evicted (or it
            // had none); else the truth routed it off its holder.
            let best = t
                .candidates
                .iter()
                .filter_map(|c| c.match_blocks)
                .max()
                .unwrap_or(0) as f64
                * block_size as f64;
            if best < 0.5 * prompt {
                held_nowhere += 1;
                if t.session_turn > 0 {
                    held_nowhere_later_turn += 1;
                }
            } else {
                // Routed off a holder: which side's filter released it.
                let truth_released = matches!(
                    t.outcome.as_str(),
                    "load_override" | "request_load_override"
                );
                *off_holder
                    .entry((truth_released, s.outcome.is_release()))
                    .or_default() += 1;
            }
            colder_in_truth += 1;
            colder_truth_tokens += tu - ru;
            colder_truth_ttft.push(t.ttft_ms);
            colder_truth_replay_ttft.push(s.ttft_s * 1000.0);
        } else if ru - tu >= 0.5 * prompt {
            colder_in_replay += 1;
            colder_replay_tokens += ru - tu;
        }
    }
    println!("{dep}: {both} requests in both the replay and the paired run");
    println!(
        "  outcomes (truth, replay): {}",
        outcomes
            .iter()
            .map(|((a, b), n)| format!("{a}/{b} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // The share served in under a second (a bimodal TTFT's fast mode),
    // and each side's split between endpoints, largest first.
    let fast = |v: &[f64]| {
        100.0 * v.iter().filter(|&&x| x < 1000.0).count() as f64 / v.len().max(1) as f64
    };
    let split = |counts: Vec<usize>| {
        let mut c = counts;
        c.sort_unstable_by(|a, b| b.cmp(a));
        let n = c.iter().sum::<usize>().max(1) as f64;
        c.iter()
            .map(|k| format!("{:.0}", 100.0 * *k as f64 / n))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    println!(
        "  served in under 1 s: truth {:.1} %, replay {:.1} %; split between endpoints (%): truth {}, replay {}",
        fast(&truth_ttft),
        fast(&replay_ttft),
        split(truth_split.into_values().collect()),
        split(replay_split.into_values().collect())
    );
    println!("  truth:  {}", quantiles(truth_ttft));
    println!("  replay: {}", quantiles(replay_ttft));
    println!(
        "  uncached tokens served: truth {:.0}, replay {:.0} ({:+.1} %)",
        truth_u,
        replay_u,
        (replay_u / truth_u.max(1.0) - 1.0) * 100.0
    );
    println!(
        "  served from the cache by the replay only: {colder_in_truth} requests, {colder_truth_tokens:.0} tokens; by the truth only: {colder_in_replay} requests, {colder_replay_tokens:.0} tokens"
    );
    println!(
        "  of the first, held on no endpoint in the truth (evicted): {held_nowhere} ({held_nowhere_later_turn} a session's later turn); the others were routed off their holder"
    );
    println!("  the others by release (truth released, replay released): {off_holder:?}");
    println!("  the first, truth:  {}", quantiles(colder_truth_ttft));
    println!(
        "  the first, replay: {}",
        quantiles(colder_truth_replay_ttft)
    );
}
