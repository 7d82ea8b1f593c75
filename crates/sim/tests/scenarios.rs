//! The named scenarios land where their descriptions say.

use std::collections::HashMap;

use gatecal_sim::{Variant, VllmFlavor, run, scenario};

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

/// Estimates each deployment's peak from its vLLM logs: the computed prefill
/// rate (v1: prompt throughput x (1 - hit rate); v0: prompt throughput)
/// averaged over sustained saturation, i.e. runs of at least 5 consecutive
/// lines reporting waiting requests, without each run's first line (the
/// engine may have been idle early in that interval); then the median over
/// the deployment's engines.
///
/// Short runs are left out on purpose: v1 counts a prompt where its prefill
/// completes, and a busy period's last completion falls in an interval that
/// already reports no waiting request, so every run loses about one prompt.
/// Over short busy periods of long prompts that loss dominates.
fn estimate_peaks(
    out: &gatecal_sim::SimOutput,
    pods: &[(String, usize, VllmFlavor)],
) -> HashMap<usize, f64> {
    let mut per_engine: HashMap<usize, Vec<f64>> = HashMap::new();
    for (pod, bytes) in &out.vllm_logs {
        let Some((_, dep, flavor)) = pods.iter().find(|(p, _, _)| pod.starts_with(p.as_str()))
        else {
            continue;
        };
        let text = String::from_utf8_lossy(bytes);
        let mut rows: Vec<(bool, f64)> = Vec::new();
        for l in text.lines() {
            let num = |key: &str| -> Option<f64> {
                let i = l.find(key)? + key.len();
                let rest = &l[i..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(rest.len());
                rest[..end].parse().ok()
            };
            let Some(prompt) = num("Avg prompt throughput: ") else {
                continue;
            };
            let waiting = match flavor {
                VllmFlavor::V1 => num("Waiting: "),
                VllmFlavor::V0 => num("Pending: "),
            }
            .unwrap_or(0.0)
                > 0.0;
            let computed = match flavor {
                VllmFlavor::V1 => {
                    prompt * (1.0 - num("Prefix cache hit rate: ").unwrap_or(0.0) / 100.0)
                }
                VllmFlavor::V0 => prompt,
            };
            rows.push((waiting, computed));
        }
        let (mut sum, mut n) = (0.0, 0usize);
        let mut i = 0;
        while i < rows.len() {
            if !rows[i].0 {
                i += 1;
                continue;
            }
            let mut j = i;
            while j < rows.len() && rows[j].0 {
                j += 1;
            }
            if j - i >= 5 {
                sum += rows[i + 1..j].iter().map(|r| r.1).sum::<f64>();
                n += j - i - 1;
            }
            i = j;
        }
        if n >= 3 {
            per_engine.entry(*dep).or_default().push(sum / n as f64);
        }
    }
    per_engine
        .into_iter()
        .map(|(d, mut v)| {
            v.sort_by(f64::total_cmp);
            (d, v[v.len() / 2])
        })
        .collect()
}

#[test]
fn glm_like_peak_is_recoverable_from_vllm_logs() {
    let s = scenario("glm-like").expect("glm-like");
    let out = run(&s, 1, &Variant::default());
    let d = &s.deployments[0];
    let pods = vec![(
        format!("{}-{}-", d.name, d.pools[0].role),
        0,
        d.pools[0].vllm,
    )];
    let est = estimate_peaks(&out, &pods);
    let e = est.get(&0).copied().expect("saturated engines");
    let err = (e - d.true_peak_tps()).abs() / d.true_peak_tps();
    assert!(err < 0.10, "estimated {e} vs {}", d.true_peak_tps());
}

#[test]
fn eight_deployments_peaks_span_and_are_recoverable() {
    let s = scenario("eight-deployments").expect("scenario");
    let peaks: Vec<f64> = s.deployments.iter().map(|d| d.true_peak_tps()).collect();
    let lo = peaks.iter().cloned().fold(f64::MAX, f64::min);
    let hi = peaks.iter().cloned().fold(0.0, f64::max);
    assert_eq!((lo, hi), (743.0, 27261.0));
    let out = run(&s, 1, &Variant::default());
    let pods: Vec<(String, usize, VllmFlavor)> = s
        .deployments
        .iter()
        .enumerate()
        .map(|(i, d)| {
            (
                format!("{}-{}-", d.name, d.pools[0].role),
                i,
                d.pools[0].vllm,
            )
        })
        .collect();
    let est = estimate_peaks(&out, &pods);
    let mut recovered = 0;
    for (i, d) in s.deployments.iter().enumerate() {
        let summary_peak = out.summary.deployments[i].true_peak_prefill_tps;
        assert_eq!(summary_peak, Some(d.true_peak_tps()));
        match est.get(&i) {
            Some(e) => {
                let err = (e - d.true_peak_tps()).abs() / d.true_peak_tps();
                eprintln!(
                    "{}: true {} estimated {e:.0} ({:.1}%)",
                    d.name,
                    d.true_peak_tps(),
                    err * 100.0
                );
                if err < 0.10 {
                    recovered += 1;
                }
            }
            None => eprintln!("{}: never saturated", d.name),
        }
    }
    assert!(recovered >= 7, "{recovered}");
}
