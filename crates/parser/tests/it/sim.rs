//! Against the simulator: for every scenario and capture variant, the
//! assembled decisions match the truth exactly in count, request id,
//! profile, filter instance, outcome and logged penalty, and the ledger
//! accounts for every line.

use std::path::PathBuf;

use gatecal_parser::{Decision, InputSpec, Item, ParseOptions, parse_inputs, parse_slice};
use gatecal_sim::{TruthRecord, Variant, run, scenario, scenario_names};

type Key = (String, String, String, String, Option<u64>);

fn truth_keys(truth: &[TruthRecord]) -> Vec<Key> {
    let mut v: Vec<Key> = truth
        .iter()
        .map(|t| {
            (
                t.request_id.clone(),
                t.profile.clone(),
                t.filter.clone(),
                t.outcome.clone(),
                t.logged_penalty_ms.map(f64::to_bits),
            )
        })
        .collect();
    v.sort();
    v
}

fn decision_keys<'a>(ds: impl Iterator<Item = &'a Decision>) -> Vec<Key> {
    let mut v: Vec<Key> = ds
        .map(|d| {
            (
                d.request_id.clone().unwrap_or_default().to_string(),
                d.profile.clone().unwrap_or_default().to_string(),
                d.filter.clone().unwrap_or_default().to_string(),
                d.outcome
                    .map(|o| o.as_str().to_string())
                    .unwrap_or_default(),
                d.logged_penalty_ms().map(f64::to_bits),
            )
        })
        .collect();
    v.sort();
    v
}

fn assert_same(what: &str, got: &[Key], want: &[Key]) {
    if got == want {
        return;
    }
    let missing: Vec<_> = want.iter().filter(|k| !got.contains(k)).take(5).collect();
    let extra: Vec<_> = got.iter().filter(|k| !want.contains(k)).take(5).collect();
    panic!(
        "{what}: {} decisions, truth {}\nmissing {missing:?}\nextra {extra:?}",
        got.len(),
        want.len()
    );
}

fn line_count(bytes: &[u8]) -> u64 {
    let n = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    n + u64::from(!bytes.is_empty() && !bytes.ends_with(b"\n"))
}

fn variants() -> Vec<(&'static str, Variant)> {
    let v = |timestamps, prefix, noise, old_encoding, full_dumps| Variant {
        timestamps,
        prefix,
        noise,
        old_encoding,
        full_dumps,
        producers_v5: false,
    };
    vec![
        ("plain", Variant::default()),
        ("timestamps", v(true, false, false, false, false)),
        ("prefix", v(false, true, false, false, false)),
        ("noise", v(false, false, true, false, false)),
        ("old_encoding", v(false, false, false, true, false)),
        ("full_dumps", v(false, false, false, false, true)),
        ("all", v(true, true, true, false, true)),
        ("all_old", v(true, true, true, true, true)),
    ]
}

#[test]
fn every_scenario_and_variant_matches_the_truth() {
    for name in scenario_names() {
        let s = scenario(name).unwrap().with_requests(120);
        for (vname, variant) in variants() {
            let what = format!("{name}/{vname}");
            let out = run(&s, 11, &variant);
            let p = parse_slice("epp.log", &out.epp_log, &ParseOptions::default()).unwrap();
            assert!(!out.truth.is_empty(), "{what}");
            assert_same(
                &what,
                &decision_keys(p.decisions()),
                &truth_keys(&out.truth),
            );
            let c = &p.ledger.counts;
            assert!(c.balanced(), "{what}: {c:?}");
            assert_eq!(c.lines_total, line_count(&out.epp_log), "{what}");
            assert_eq!(c.bytes, out.epp_log.len() as u64, "{what}");
            // Only the noise variant's cut last line is malformed.
            let want_malformed = u64::from(variant.noise);
            assert_eq!(
                c.lines_malformed, want_malformed,
                "{what}: {:?}",
                c.first_malformed
            );
            assert_eq!(c.decisions_evicted, 0, "{what}");
            assert_eq!(c.decisions_without_instance, 0, "{what}");
            if !variant.noise {
                assert_eq!(
                    c.shapes.other + c.shapes.klog + c.shapes.go_panic,
                    0,
                    "{what}"
                );
            }
            // With the kubectl prefix, the deployment is the EPP pod's owner.
            let truth_dep: std::collections::BTreeMap<&str, &str> = out
                .truth
                .iter()
                .map(|t| (t.epp_pod.as_str(), t.deployment.as_str()))
                .collect();
            // Observed TTFT: the `EPP received request` line to the first
            // response chunk's, as the truth's, within the log's time
            // resolution (a second with the old encoding).
            let ttft: std::collections::BTreeMap<&str, f64> = out
                .truth
                .iter()
                .map(|t| (t.request_id.as_str(), t.ttft_ms))
                .collect();
            let resolution_ms = if variant.old_encoding { 1000.0 } else { 0.001 };
            for d in p.decisions() {
                let want = ttft[d.request_id.as_deref().unwrap()];
                let got = d.observed_ttft_ms.unwrap_or(f64::NAN);
                assert!(
                    (got - want).abs() <= resolution_ms,
                    "{what}: {:?} observed {got} ms, truth {want} ms",
                    d.request_id
                );
            }
            for d in p.decisions() {
                if variant.prefix {
                    let pod = d.epp_pod.as_deref().unwrap();
                    assert_eq!(Some(&d.deployment.as_str()), truth_dep.get(pod), "{what}");
                }
                assert!(d.ts.is_some(), "{what}");
            }
        }
    }
}

#[test]
fn decision_times_and_candidates_match_the_truth() {
    // HEAD encoding: the filter line's ts is the truth's ts; the survivors of
    // the previous filter (or the endpoint dumps) are the candidates.
    let s = scenario("latency-predictor").unwrap().with_requests(150);
    let variant = Variant {
        full_dumps: true,
        ..Variant::default()
    };
    let out = run(&s, 5, &variant);
    let p = parse_slice("epp.log", &out.epp_log, &ParseOptions::default()).unwrap();
    let mut got: Vec<&Decision> = p.decisions().collect();
    let mut want: Vec<&TruthRecord> = out.truth.iter().collect();
    got.sort_by(|a, b| {
        (a.request_id.as_deref(), a.profile_run, a.source.line).cmp(&(
            b.request_id.as_deref(),
            b.profile_run,
            b.source.line,
        ))
    });
    want.sort_by(|a, b| a.request_id.cmp(&b.request_id).then(a.ts.total_cmp(&b.ts)));
    assert_eq!(got.len(), want.len());
    for (d, t) in got.iter().zip(&want) {
        assert_eq!(d.request_id.as_deref(), Some(t.request_id.as_str()));
        assert_eq!(d.filter.as_deref(), Some(t.filter.as_str()));
        if d.outcome != Some(gatecal_filter::Outcome::NotApplicable) {
            assert!(
                (d.ts.unwrap() - t.ts).abs() < 1e-6,
                "{} vs {}",
                d.ts.unwrap(),
                t.ts
            );
        }
        let eps: Vec<&str> = d.candidates.iter().map(|c| c.endpoint.as_str()).collect();
        let want_eps: Vec<&str> = t.candidates.iter().map(|c| c.endpoint.as_str()).collect();
        assert_eq!(eps, want_eps, "{}", t.request_id);
        assert_eq!(d.chosen.as_deref(), Some(t.chosen_endpoint.as_str()));
    }
}

#[test]
fn vllm_logs_give_stats_records() {
    for name in scenario_names() {
        let s = scenario(name).unwrap().with_requests(400);
        let out = run(&s, 3, &Variant::default());
        assert!(!out.vllm_logs.is_empty());
        let mut stats = 0;
        for (pod, bytes) in &out.vllm_logs {
            let p =
                parse_slice(&format!("vllm/{pod}.log"), bytes, &ParseOptions::default()).unwrap();
            let c = &p.ledger.counts;
            assert!(c.balanced());
            assert_eq!(
                c.lines_malformed, 0,
                "{name}/{pod}: {:?}",
                c.first_malformed
            );
            assert_eq!(c.lines_total, line_count(bytes));
            let want = bytes
                .split(|&b| b == b'\n')
                .filter(|l| l.windows(23).any(|w| w == b"Avg prompt throughput: "))
                .count() as u64;
            assert_eq!(c.vllm_stats, want, "{name}/{pod}");
            stats += c.vllm_stats;
            for st in p.vllm_stats() {
                assert_eq!(st.pod.as_deref(), Some(pod.as_str()));
                assert!(st.prompt_throughput >= 0.0);
            }
        }
        assert!(stats > 0, "{name}");
    }
}

fn find_named(dir: &std::path::Path, name: &str, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            find_named(&p, name, out);
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push(p);
        }
    }
}

/// The generated fixtures, when present: every `fixtures/**/epp.log` with
/// `truth.jsonl` beside it, and their `vllm/*.log`.
#[test]
fn generated_fixtures_match_their_truth() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut logs = Vec::new();
    find_named(&root, "epp.log", &mut logs);
    let mut checked = 0;
    for epp in &logs {
        let dir = epp.parent().unwrap();
        let truth = dir.join("truth.jsonl");
        if !truth.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&truth).unwrap();
        let records: Vec<TruthRecord> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let mut ds = Vec::new();
        checked += 1;
        let ledger = parse_inputs(&[InputSpec::path(epp)], &ParseOptions::default(), |i| {
            if let Item::Decision(d) = i {
                ds.push(*d);
            }
        })
        .unwrap();
        assert!(ledger.total.balanced());
        let what = epp.display().to_string();
        assert_same(&what, &decision_keys(ds.iter()), &truth_keys(&records));
        // The truth file is itself a valid decisions file.
        let mut n = 0;
        let l = parse_inputs(&[InputSpec::path(&truth)], &ParseOptions::default(), |_| {
            n += 1
        })
        .unwrap();
        assert_eq!(l.total.lines_malformed, 0, "{}", truth.display());
        assert_eq!(n, records.len());
        let vllm = dir.join("vllm");
        if vllm.is_dir() {
            let l =
                parse_inputs(&[InputSpec::path(&vllm)], &ParseOptions::default(), |_| {}).unwrap();
            assert_eq!(l.total.lines_malformed, 0, "{}", vllm.display());
            assert!(l.total.vllm_stats > 0);
        }
    }
    eprintln!("{checked} generated fixtures checked");
}

#[test]
fn threads_give_the_same_items_and_ledger() {
    let s = scenario("pd-disagg").unwrap().with_requests(150);
    let all = Variant {
        timestamps: true,
        prefix: true,
        noise: true,
        old_encoding: false,
        full_dumps: true,
        producers_v5: false,
    };
    for variant in [Variant::default(), all] {
        let out = run(&s, 2, &variant);
        let one = parse_slice("epp.log", &out.epp_log, &ParseOptions::default()).unwrap();
        for (threads, block_bytes) in [(2, 1), (3, 4096), (4, 65_536), (2, 1 << 20)] {
            let opts = ParseOptions {
                threads,
                block_bytes,
                ..ParseOptions::default()
            };
            let many = parse_slice("epp.log", &out.epp_log, &opts).unwrap();
            assert_eq!(
                many.ledger, one.ledger,
                "{threads} threads, {block_bytes} B blocks"
            );
            assert_eq!(
                many.items, one.items,
                "{threads} threads, {block_bytes} B blocks"
            );
        }
    }
}

#[test]
fn threads_stop_cleanly_on_strict_errors_and_keep_edge_results() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/edge");
    let mut want = None;
    for threads in [1, 2, 3] {
        let opts = ParseOptions {
            threads,
            block_bytes: 512,
            ..ParseOptions::default()
        };
        // Debug text, not `==`: a NaN penalty is not equal to itself.
        let mut items = Vec::new();
        let ledger = parse_inputs(&[InputSpec::path(&dir)], &opts, |i| {
            items.push(format!("{i:?}"))
        })
        .unwrap();
        assert!(ledger.total.balanced());
        assert!(ledger.total.lines_malformed > 0);
        match &want {
            None => want = Some((ledger, items)),
            Some((l, i)) => {
                assert_eq!(&ledger, l, "{threads}");
                assert!(&items == i, "{threads} threads: items differ");
            }
        }
        let strict = ParseOptions {
            strict: true,
            ..opts
        };
        let err = parse_inputs(
            &[InputSpec::path(dir.join("truncated_last_line.log"))],
            &strict,
            |_| {},
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("truncated_last_line.log:1"),
            "{err}"
        );
    }
}
