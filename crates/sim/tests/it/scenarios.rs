//! The named scenarios land where their descriptions say.

use gatecal_sim::{Variant, run, scenario};

#[test]
fn glm_like_summary_in_range() {
    let s = scenario("glm-like").expect("glm-like");
    let out = run(&s, 1, &Variant::default());
    let o = &out.summary.overall;
    eprintln!("{}", serde_json::to_string_pretty(o).unwrap_or_default());
    assert!(o.decisions > 500, "{}", o.decisions);
    assert!(o.release_share < 0.01, "release {}", o.release_share);
    assert!(
        (0.10..=0.20).contains(&o.pinned_5_18s_share),
        "pinned {}",
        o.pinned_5_18s_share
    );
    let p50 = o.gate_input_p50_ms.expect("p50");
    let p90 = o.gate_input_p90_ms.expect("p90");
    let p99 = o.gate_input_p99_ms.expect("p99");
    assert!(p50 < 1000.0 && (3000.0..12000.0).contains(&p90) && (9000.0..18000.0).contains(&p99));
    assert_eq!(
        out.summary.deployments[0].max_ttft_penalty_ms,
        Some(18000.0)
    );
}

#[test]
fn peak_truth_is_the_effective_saturated_rate() {
    // The per-request overhead and the steps shared with decode make the
    // rate at which an engine drains a backlog lower than its raw compute
    // rate: a little for long prompts, by about half for the short uncached
    // suffixes of high prefix-hit traffic.
    let s = scenario("peak-sweep").expect("scenario");
    let out = run(&s, 1, &Variant::default());
    let mut short = 0;
    let mut long = 0;
    for (d, spec) in out.summary.deployments.iter().zip(&s.deployments) {
        let raw = d.true_peak_prefill_tps.expect("raw");
        assert_eq!(raw, spec.true_peak_tps());
        let eff = d.effective_peak_prefill_tps.expect("saturated");
        assert!(
            eff < raw && eff > 0.3 * raw,
            "{}: {eff} vs {raw}",
            d.deployment
        );
        let sat = d.saturated_intervals.expect("vllm simulated");
        eprintln!(
            "{}: raw {raw} effective {eff} saturated {sat}",
            d.deployment
        );
        if (12..=40).contains(&sat) {
            short += 1;
        }
        if sat >= 80 {
            long += 1;
        }
    }
    assert!(
        short >= 2 && long >= 2,
        "saturation lengths: {short} short, {long} long"
    );
    let hi = &out.summary.deployments[0];
    let lo = &out.summary.deployments[4];
    assert!(hi.effective_peak_prefill_tps.unwrap() < 0.7 * hi.true_peak_prefill_tps.unwrap());
    assert!(lo.effective_peak_prefill_tps.unwrap() > 0.8 * lo.true_peak_prefill_tps.unwrap());
}

#[test]
fn v1_hit_rate_is_a_rolling_window_of_recent_requests() {
    // rag-hi-shift's burst brings longer, less cached prompts: the logged
    // hit rate falls during the burst but lags it (the window holds the
    // most recent 1000 requests, most from before the burst).
    let s = scenario("peak-sweep").expect("scenario");
    let out = run(&s, 1, &Variant::default());
    let (_, log) = out
        .vllm_logs
        .iter()
        .find(|(p, _)| p.starts_with("rag-hi-shift-"))
        .expect("log");
    let text = String::from_utf8_lossy(log);
    let hits: Vec<f64> = text
        .lines()
        .filter_map(|l| {
            let i = l.find("Prefix cache hit rate: ")? + "Prefix cache hit rate: ".len();
            l[i..].trim_end_matches('%').parse().ok()
        })
        .collect();
    let max = hits.iter().cloned().fold(0.0, f64::max);
    let min = hits.iter().cloned().fold(100.0, f64::min);
    assert!(max > 85.0, "{max}");
    assert!(min < max - 5.0, "{min}..{max}");
    // Line to line, the window moves slowly once it holds more than the
    // first few dozen requests (the first lines of a run, 30 s, can jump:
    // the first request on each engine misses the system prompt).
    let step = hits[3..]
        .windows(2)
        .map(|w| (w[1] - w[0]).abs())
        .fold(0.0, f64::max);
    assert!(step < 5.0, "{step}");
}
