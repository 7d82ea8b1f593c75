//! docs/usage.md and docs/json-schema.md against the binary: every flag of
//! `--help` is documented and no documented flag is gone; every key of the
//! JSON report is in the schema and the schema lists no key the reports
//! never hold (unless it says when they are absent).

use gatecal_test_support::docs;
use gatecal_test_support::report;

use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args(args)
        .output()
        .expect("run recommend")
}

fn json(args: &[&str], what: &str) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json", "-q"]);
    report::ok_json(&run(&all), what)
}

#[test]
fn usage_documents_every_flag_of_help() {
    let out = run(&["--help"]);
    assert!(out.status.success());
    docs::check_flags("recommend", &String::from_utf8_lossy(&out.stdout));
}

/// Reports that between them hold every optional part: Prometheus that
/// disagrees with the vLLM lines (and conflicting samples), traces,
/// candidates, a recommendation with windows, every matched-token source
/// (records read back included), a flag against the log.
#[test]
fn json_schema_documents_every_key_of_the_report() {
    let dir = tempfile::tempdir().unwrap();
    // Counters that count twice the computed tokens and half the hits:
    // the peak and the hit rate disagree with the vLLM lines.
    let off = dir.path().join("prometheus-off");
    std::fs::create_dir(&off).unwrap();
    let prom = docs::fixture("eight-deployments/prometheus");
    for (file, factor) in [
        ("prompt_tokens_local_compute.json", 2.0),
        ("prefix_cache_hits.json", 0.5),
    ] {
        let text = std::fs::read_to_string(format!("{prom}/{file}")).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for series in v["data"]["result"].as_array_mut().unwrap() {
            for x in series["values"].as_array_mut().unwrap() {
                let n: f64 = x[1].as_str().unwrap().parse().unwrap();
                x[1] = format!("{}", n * factor).into();
            }
        }
        std::fs::write(off.join(file), v.to_string()).unwrap();
    }
    let disagreeing = json(
        &[
            off.to_str().unwrap(),
            &docs::fixture("eight-deployments/epp.log"),
            &docs::fixture("eight-deployments/vllm"),
            &prom,
            &docs::fixture("eight-deployments/traces.jsonl"),
            "--what-if",
            "peakPrefillThroughput=3000,maxTTFTPenaltyMs=1500",
        ],
        "Prometheus against the lines: ",
    );
    assert!(
        disagreeing["input"]["duplicates"]["prometheus_conflicts"]
            .as_u64()
            .unwrap()
            > 0
    );
    let recommended = json(
        &[
            &docs::fixture("pd-disagg/epp.log"),
            &docs::fixture("pd-disagg/vllm"),
            "--window",
            "5m",
        ],
        "pd-disagg: ",
    );
    assert!(recommended["deployments"][0]["recommended"].is_object());
    let records = dir.path().join("records.jsonl");
    let sources = json(
        &[
            &docs::fixture("edge/producers_v5.log"),
            &docs::fixture("edge/decisions.jsonl"),
            &docs::fixture("glm-like-v1/epp.log"),
            "--max-ttft-penalty-ms",
            "18000",
            "--emit-decisions",
            records.to_str().unwrap(),
        ],
        "producers: ",
    );
    // glm-like-v1's log shows maxPenalty 5000: the flag contradicts it.
    let flagged = json(
        &[
            &docs::fixture("glm-like-v1/epp.log"),
            "--max-ttft-penalty-ms",
            "18000",
        ],
        "a flag against the log: ",
    );
    assert_eq!(
        flagged["deployments"][0]["current"]["config"]["log_disagreements"][0]["parameter"],
        "maxTTFTPenaltyMs"
    );
    let read_back = json(&[records.to_str().unwrap()], "records read back: ");
    // At -v=4 with first tokens: the predictions and the self-check.
    let predicted = json(&[&docs::fixture("demo/glm-like.log.gz")], "demo: ");
    assert!(predicted["deployments"][0]["ttft_self_check"].is_object());
    docs::check_schema(
        "gatecal.recommend/v3",
        &[
            disagreeing,
            recommended,
            sources,
            read_back,
            flagged,
            predicted,
        ],
    );
}

/// docs/example-recommend.md is the output of the command in its first
/// line (an HTML comment), run from the repository's root.
#[test]
fn the_example_report_is_what_its_command_prints() {
    let page = docs::doc("example-recommend.md");
    let (head, body) = page.split_once('\n').unwrap();
    let command = head
        .strip_prefix("<!-- recommend ")
        .and_then(|c| c.strip_suffix(" -->"))
        .expect("the page starts with its command");
    // Words, and single-quoted ones.
    let mut args = Vec::new();
    let mut rest = command.trim();
    while !rest.is_empty() {
        let (word, after) = match rest.strip_prefix('\'') {
            Some(q) => q.split_once('\'').expect("a closing quote"),
            None => rest.split_once(' ').unwrap_or((rest, "")),
        };
        args.push(word.to_string());
        rest = after.trim_start();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args(&args)
        .current_dir(docs::root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    // The summary names the build (`0.1.0 (commit)`), which every commit
    // changes: compared as present, not as written.
    let unversioned = |t: &str| -> String {
        t.lines()
            .map(|l| {
                if l.starts_with("| gatecal | ") {
                    "| gatecal | VERSION |"
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(printed.contains("| gatecal | "), "{printed}");
    assert_eq!(
        unversioned(body.trim_start_matches('\n')),
        unversioned(&printed),
        "docs/example-recommend.md is not what `recommend {command}` prints now: regenerate it"
    );
}
