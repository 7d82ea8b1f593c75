//! Paired runs (`--set`), replayed traces (`--workload-trace`) and the
//! truth's TTFT.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use gatecal_sim::{Scenario, TruthRecord, Variant, run, scenario};

/// One record per request (the first of its decisions).
fn per_request(truth: &[TruthRecord]) -> BTreeMap<String, &TruthRecord> {
    let mut m = BTreeMap::new();
    for t in truth {
        m.entry(t.request_id.clone()).or_insert(t);
    }
    m
}

/// The workload side of a request: what routing must not change.
fn content(t: &TruthRecord) -> (i64, i64, Option<u64>) {
    (
        t.prompt_tokens,
        t.output_tokens,
        t.think_time_ms.map(f64::to_bits),
    )
}

fn paired(base: &Scenario, key: &str, value: &str) -> (Vec<TruthRecord>, Vec<TruthRecord>) {
    let mut other = base.clone();
    other.set_filter_param(None, key, value).expect("set");
    let a = run(base, 3, &Variant::default()).truth;
    let b = run(&other, 3, &Variant::default()).truth;
    (a, b)
}

/// Two runs differing only in the filter's bar: the same arrival slots,
/// sessions, prompts, outputs and think times; different routing.
#[test]
fn a_config_change_keeps_the_workload() {
    let base = scenario("glm-like").unwrap().with_requests(500);
    let (a, b) = paired(&base, "maxTTFTPenaltyMs", "1000");
    let (ra, rb) = (per_request(&a), per_request(&b));

    // Arrivals: a request id is an arrival slot; a slot present in both
    // runs arrives at the same instant.
    let mut common = 0;
    for (id, x) in &ra {
        if let Some(y) = rb.get(id) {
            common += 1;
            assert_eq!(x.arrival_ts.to_bits(), y.arrival_ts.to_bits(), "{id}");
        }
    }
    assert!(common * 4 >= ra.len() * 3, "{common} of {}", ra.len());

    // Sessions: each (session, turn) sent in both runs has the same
    // prompt, output and think time, and every new session opens in the
    // same slot with the same first prompt.
    let turns = |r: &BTreeMap<String, &TruthRecord>| {
        r.values()
            .map(|t| ((t.session_id, t.session_turn), (*t).clone()))
            .collect::<BTreeMap<_, _>>()
    };
    let (ta, tb) = (turns(&ra), turns(&rb));
    let mut follow_ups = 0;
    for (k, x) in &ta {
        if let Some(y) = tb.get(k) {
            assert_eq!(content(x), content(y), "session {} turn {}", k.0, k.1);
            if k.1 > 0 {
                follow_ups += 1;
            }
        }
    }
    assert!(follow_ups > 50, "{follow_ups} follow-ups in both runs");
    let opens = |t: &BTreeMap<(u64, u32), TruthRecord>| {
        t.iter()
            .filter(|(k, _)| k.1 == 0)
            .map(|(k, v)| {
                (
                    k.0,
                    v.request_id.clone(),
                    v.arrival_ts.to_bits(),
                    content(v),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(opens(&ta), opens(&tb));

    // Routing differs: the lower bar releases pins the default kept.
    let released = |t: &[TruthRecord]| t.iter().filter(|r| r.outcome == "load_override").count();
    assert!(released(&b) > released(&a));
    let moved = ra
        .iter()
        .filter(|(id, x)| {
            rb.get(*id)
                .is_some_and(|y| y.chosen_endpoint != x.chosen_endpoint)
        })
        .count();
    assert!(moved > 0);
}

/// With users that wait for their answers, two runs differing only in
/// the bar send exactly the same requests (ids, sessions, turns, content);
/// only when a follow-up turn arrives moves with its previous answer. New
/// sessions open at the same instants.
#[test]
fn users_that_wait_send_the_same_requests_under_any_config() {
    let base = scenario("glm-like")
        .unwrap()
        .with_requests(500)
        .with_users();
    let (a, b) = paired(&base, "maxTTFTPenaltyMs", "1000");
    let (ra, rb) = (per_request(&a), per_request(&b));
    assert!(ra.len() > 300, "{}", ra.len());
    // Not one request is dropped or added, except turns that a slower run
    // pushes past the end.
    let key = |r: &BTreeMap<String, &TruthRecord>| {
        r.values()
            .map(|t| {
                (
                    (t.session_id, t.session_turn),
                    (t.request_id.clone(), content(t)),
                )
            })
            .collect::<BTreeMap<_, _>>()
    };
    let (ka, kb) = (key(&ra), key(&rb));
    let mut common = 0;
    for (k, x) in &ka {
        if let Some(y) = kb.get(k) {
            common += 1;
            assert_eq!(x, y, "session {} turn {}", k.0, k.1);
        }
    }
    assert!(common > 250, "{common} in both");
    // A turn one run sent and the other did not is a follow-up that the
    // other run's answers pushed past the end: its session opened in both,
    // and the other run sent every turn before it.
    for (x, y) in [(&ka, &kb), (&kb, &ka)] {
        for &(sid, turn) in x.keys().filter(|k| !y.contains_key(k)) {
            assert!(
                turn > 0 && y.contains_key(&(sid, 0)),
                "session {sid} turn {turn}"
            );
            // The turns after it are missing too.
            assert!(
                !y.contains_key(&(sid, turn + 1)),
                "session {sid} turn {turn}"
            );
        }
    }
    // A session sends its turns in order, none before its previous answer
    // ended.
    for r in [&ra, &rb] {
        let mut by_turn: BTreeMap<(u64, u32), &TruthRecord> = BTreeMap::new();
        for t in r.values() {
            by_turn.insert((t.session_id, t.session_turn), t);
        }
        for ((sid, turn), t) in &by_turn {
            if *turn == 0 {
                continue;
            }
            let prev = by_turn
                .get(&(*sid, turn - 1))
                .unwrap_or_else(|| panic!("session {sid} turn {turn} without its previous turn"));
            assert!(t.arrival_ts > prev.arrival_ts + prev.ttft_ms / 1000.0);
        }
    }
    // New sessions open at the same instants; routing differs.
    let opens = |r: &BTreeMap<String, &TruthRecord>| {
        r.values()
            .filter(|t| t.session_turn == 0)
            .map(|t| (t.session_id, t.arrival_ts.to_bits()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(opens(&ra), opens(&rb));
    let released = |t: &[TruthRecord]| t.iter().filter(|r| r.outcome == "load_override").count();
    assert!(released(&b) > released(&a));
    // Under the default closed loop, the lower bar changes which requests
    // are sent at all (slots whose sessions all wait are dropped).
    let plain = scenario("glm-like").unwrap().with_requests(500);
    let (pa, pb) = paired(&plain, "maxTTFTPenaltyMs", "1000");
    let ids = |t: &[TruthRecord]| {
        per_request(t)
            .into_values()
            .map(|t| (t.session_id, t.session_turn))
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_ne!(ids(&pa), ids(&pb));
}

/// The routing seed: by default the run's seed (nothing changes); another
/// one, with users that wait, keeps every request (ids, sessions, turns,
/// content, the instants sessions open) and changes only the routing's
/// draws: candidate order, signals, tie-breaks, and so which endpoints
/// serve the requests.
#[test]
fn a_routing_seed_changes_only_the_routing() {
    let base = scenario("glm-like")
        .unwrap()
        .with_requests(400)
        .with_users();
    let a = run(&base, 3, &Variant::default());
    let same = run(&base.clone().with_routing_seed(3), 3, &Variant::default());
    assert_eq!(a.epp_log, same.epp_log);
    let b = run(&base.clone().with_routing_seed(11), 3, &Variant::default()).truth;
    let (ra, rb) = (per_request(&a.truth), per_request(&b));
    assert!(ra.len() > 250, "{}", ra.len());
    let key = |r: &BTreeMap<String, &TruthRecord>| {
        r.values()
            .map(|t| {
                (
                    (t.session_id, t.session_turn),
                    (t.request_id.clone(), content(t)),
                )
            })
            .collect::<BTreeMap<_, _>>()
    };
    let (ka, kb) = (key(&ra), key(&rb));
    let common = ka.iter().filter(|(k, x)| kb.get(*k) == Some(*x)).count();
    // Every turn is in both runs, the same, but for follow-ups the other
    // run's answers pushed past the end.
    assert!(common * 50 >= ka.len() * 49, "{common} of {}", ka.len());
    for (k, x) in &ka {
        if let Some(y) = kb.get(k) {
            assert_eq!(x, y, "session {} turn {}", k.0, k.1);
        }
    }
    let opens = |r: &BTreeMap<String, &TruthRecord>| {
        r.values()
            .filter(|t| t.session_turn == 0)
            .map(|t| (t.session_id, t.arrival_ts.to_bits()))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(opens(&ra), opens(&rb));
    // The routing is not the same.
    let moved = ra
        .iter()
        .filter(|(id, x)| {
            rb.get(*id)
                .is_some_and(|y| y.chosen_endpoint != x.chosen_endpoint)
        })
        .count();
    assert!(moved * 10 > ra.len(), "{moved} of {} moved", ra.len());
}

/// `ttft_ms` is the engine model's: on an idle engine, the 2 ms to the
/// engine, then the prefill's overhead, steps and tokens at the raw rate.
#[test]
fn ttft_is_the_engine_models() {
    let s = scenario("glm-like").unwrap().with_requests(200);
    let pool = &s.deployments[0].pools[0];
    let out = run(&s, 1, &Variant::default());
    let first = &out.truth[0];
    assert!(
        first
            .candidates
            .iter()
            .all(|c| c.in_flight_tokens == Some(0) && c.match_blocks == Some(0))
    );
    let tokens = first.prompt_tokens;
    let steps = (tokens + pool.max_num_batched_tokens - 1) / pool.max_num_batched_tokens;
    let want = 2.0
        + pool.prefill_overhead_ms
        + steps as f64 * pool.step_overhead_ms
        + tokens as f64 / pool.true_peak_tps * 1000.0;
    assert!(
        (first.ttft_ms - want).abs() < 1e-5,
        "{} vs {want}",
        first.ttft_ms
    );
    // Every routed request has one, at least the fixed costs; one request's
    // decisions share it.
    for t in &out.truth {
        assert!(t.ttft_ms >= 2.0 + pool.prefill_overhead_ms, "{}", t.ttft_ms);
    }
    let pd = run(
        &scenario("pd-disagg").unwrap().with_requests(100),
        1,
        &Variant::default(),
    );
    let mut by_id: BTreeMap<&str, f64> = BTreeMap::new();
    for t in &pd.truth {
        let v = *by_id.entry(t.request_id.as_str()).or_insert(t.ttft_ms);
        assert_eq!(v.to_bits(), t.ttft_ms.to_bits());
        assert!(t.ttft_ms > 0.0);
    }
}

fn epp_sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_epp-sim"))
}

fn fails_with(args: &[&str], want: &str) {
    let out = epp_sim().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
}

#[test]
fn set_rejects_unknown_keys_and_bad_values() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.log");
    let out = out.to_str().unwrap();
    let base = ["--scenario", "glm-like", "--requests", "20", "--out", out];
    let cases = [
        (
            "maxTTFTPenaltyMS=5000",
            "unknown filter parameter \"maxTTFTPenaltyMS\"",
        ),
        ("prefillCalibrationFile=x", "unknown filter parameter"),
        ("maxTTFTPenaltyMs=-1", "maxTTFTPenaltyMs must be >= 0"),
        ("maxTTFTPenaltyMs=soon", "invalid type: string \"soon\""),
        (
            "penaltyMode=dynamic",
            "penaltyMode must be \"static\" or \"matchedTokens\"",
        ),
        (
            "affinityThreshold=1.5",
            "affinityThreshold must be in [0, 1]",
        ),
        (
            "other:maxTTFTPenaltyMs=5000",
            "unknown deployment \"other\"",
        ),
        ("maxTTFTPenaltyMs", "expected [DEPLOYMENT:]KEY=VALUE"),
    ];
    for (set, want) in cases {
        let mut args = base.to_vec();
        args.extend(["--set", set]);
        fails_with(&args, want);
    }
    // A valid setting, on the named deployment.
    let mut args = base.to_vec();
    args.extend(["--set", "glm-5-2:penaltyMode=matchedTokens"]);
    let st = epp_sim().args(&args).output().unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
}

fn truth_of(log: &Path) -> Vec<TruthRecord> {
    let text = std::fs::read_to_string(log.with_file_name("x.truth.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A small trace: its arrivals, lengths and shared prefixes drive the run.
#[test]
fn a_trace_gives_the_arrivals_lengths_and_shared_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    // Line 2 shares its first two 512-token blocks with line 1, line 3
    // shares nothing, line 4 all three of line 1's (and adds a partial
    // fourth block), line 5 is line 1 again.
    let lines = [
        (0, 1536, 20, vec![1, 2, 3]),
        (40_000, 1300, 5, vec![1, 2, 9]),
        (40_000, 700, 7, vec![10, 11]),
        (90_500, 1700, 1, vec![1, 2, 3, 12]),
        (300_000, 1536, 3, vec![1, 2, 3]),
    ];
    let mut text = String::new();
    for (ts, input, output, ids) in &lines {
        text.push_str(&format!(
            "{{\"timestamp\": {ts}, \"input_length\": {input}, \"output_length\": {output}, \"hash_ids\": {ids:?}}}\n"
        ));
    }
    std::fs::write(&trace, text).unwrap();
    let log = dir.path().join("x.log");
    let st = epp_sim()
        .args(["--scenario", "glm-like", "--seed", "4", "--workload-trace"])
        .arg(&trace)
        .arg("--out")
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let truth = truth_of(&log);
    assert_eq!(truth.len(), lines.len());
    let start = scenario("glm-like").unwrap().start_epoch_s as f64;
    let bs = 64;
    for (t, (ts, input, output, _)) in truth.iter().zip(&lines) {
        assert!((t.arrival_ts - (start + *ts as f64 / 1000.0)).abs() < 1e-6);
        assert_eq!((t.prompt_tokens, t.output_tokens), (*input, *output));
        assert_eq!(t.think_time_ms, None);
        assert!(
            t.candidates
                .iter()
                .all(|c| c.total_blocks == Some(input / bs))
        );
    }
    assert_eq!(
        truth.iter().map(|t| t.session_id).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    // The match where the earlier request went: whole 512-token blocks in
    // 64-token blocks, capped at the prompt; none elsewhere.
    let held = |t: &TruthRecord, on: &str| -> Vec<i64> {
        t.candidates
            .iter()
            .map(|c| {
                if c.endpoint == on {
                    c.match_blocks.unwrap()
                } else {
                    -c.match_blocks.unwrap()
                }
            })
            .collect()
    };
    let first = &truth[0].chosen_endpoint;
    let expect = |t: &TruthRecord, blocks: i64| {
        let got = held(t, first);
        assert!(got.contains(&blocks), "{got:?}");
        assert!(got.iter().all(|&m| m == blocks || m == 0), "{got:?}");
    };
    expect(&truth[1], 2 * 512 / bs);
    assert!(
        truth[2]
            .candidates
            .iter()
            .all(|c| c.match_blocks == Some(0))
    );
    expect(&truth[3], 3 * 512 / bs);
    // Line 4 went where line 1 is cached (the filter pins it there), and
    // line 5 finds all of it.
    assert_eq!(&truth[3].chosen_endpoint, first);
    expect(&truth[4], 1536 / bs);

    let tr = trace.to_str().unwrap();
    fails_with(
        &[
            "--scenario",
            "glm-like",
            "--workload-trace",
            tr,
            "--trace-deployment",
            "nope",
        ],
        "--trace-deployment \"nope\": scenario glm-like has glm-5-2",
    );

    // Malformed lines name the file and line.
    std::fs::write(
        &trace,
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n{\"timestamp\": 5, \"input_length\": 10}\n",
    )
    .unwrap();
    let tr = trace.to_str().unwrap();
    let args = ["--scenario", "glm-like", "--workload-trace", tr];
    fails_with(&args, &format!("{tr}:2: missing field `output_length`"));
}

/// A replayed trace is open loop: under another config the arrivals and
/// requests are the same, request for request.
#[test]
fn a_trace_replays_identically_under_another_config() {
    let trace: Vec<gatecal_sim::TraceRequest> = (0..60)
        .map(|i| gatecal_sim::TraceRequest {
            timestamp_ms: i as f64 * 700.0,
            input_tokens: 3000 + (i % 7) * 900,
            output_tokens: 50 + i % 5,
            hash_ids: (0..(3000 + (i % 7) * 900 + 511) / 512)
                .map(|b| {
                    if b < 3 {
                        b as u64
                    } else {
                        1000 * i as u64 + b as u64
                    }
                })
                .collect(),
        })
        .collect();
    let base = scenario("glm-like")
        .unwrap()
        .with_workload_trace("glm-5-2", trace.into())
        .unwrap();
    let (a, b) = paired(&base, "penaltyMode", "matchedTokens");
    let key = |t: &[TruthRecord]| {
        per_request(t)
            .values()
            .map(|r| (r.request_id.clone(), r.arrival_ts.to_bits(), content(r)))
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&a).len(), 60);
    assert_eq!(key(&a), key(&b));
}
