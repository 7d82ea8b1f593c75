//! Framing, noise and encoding variants.

use crate::common::{check_log_against_truth, parse_lenient, unframe};
use gatecal_sim::{Variant, run, scenario};

#[test]
fn framing_strips_to_the_same_lines() {
    let s = scenario("eight-deployments")
        .expect("scenario")
        .with_requests(300);
    let plain = run(&s, 1, &Variant::default());
    let framed = run(
        &s,
        1,
        &Variant {
            timestamps: true,
            prefix: true,
            ..Variant::default()
        },
    );
    assert_eq!(plain.truth, framed.truth);
    let text = String::from_utf8(framed.epp_log.clone()).expect("utf8");
    let bodies: Vec<&str> = text.lines().map(unframe).collect();
    let plain_text = String::from_utf8(plain.epp_log).expect("utf8");
    let plain_lines: Vec<&str> = plain_text.lines().collect();
    assert_eq!(bodies.len(), plain_lines.len());
    for (i, (a, b)) in bodies.iter().zip(&plain_lines).enumerate() {
        assert!(a == b, "line {}: {a} != {b}", i + 1);
    }
    for l in text.lines().take(50) {
        assert!(l.starts_with("[pod/"), "{l}");
        let after = &l[l.find("] ").expect("prefix") + 2..];
        assert_eq!(&after[19..20], ".");
        assert_eq!(&after[29..31], "Z ", "{after}");
    }
    // Several EPP pods in one stream.
    let pods: std::collections::BTreeSet<&str> = text
        .lines()
        .map(|l| &l[..l.find("] ").unwrap_or(0)])
        .collect();
    assert_eq!(pods.len(), 8);
}

#[test]
fn noise_is_only_where_expected() {
    let s = scenario("balanced").expect("scenario").with_requests(150);
    let clean = run(&s, 1, &Variant::default());
    let noisy = run(
        &s,
        1,
        &Variant {
            noise: true,
            ..Variant::default()
        },
    );
    assert_eq!(clean.truth, noisy.truth);
    assert!(!noisy.epp_log.ends_with(b"\n"), "truncated last line");
    assert!(
        std::str::from_utf8(&noisy.epp_log).is_err(),
        "invalid UTF-8 present"
    );
    let (objs, other) = parse_lenient(&noisy.epp_log);
    check_log_against_truth(&objs, &noisy.truth);
    let text: Vec<String> = other
        .iter()
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    assert!(text.iter().any(|l| l.starts_with("panic: ")));
    assert!(text.iter().any(|l| l.starts_with("goroutine ")));
    assert!(text.iter().any(|l| l.starts_with('\t')));
    assert!(text.iter().any(|l| l.is_empty()));
    for l in &text {
        let ok = l.is_empty()
            || l.starts_with("panic: ")
            || l.starts_with("[signal")
            || l.starts_with("goroutine ")
            || l.starts_with('\t')
            || l.starts_with("github.com/")
            || l.starts_with("created by ")
            || l.starts_with('I')
            || l.starts_with('E')
            || l.contains('\u{fffd}')
            || l.starts_with("{\"level\"");
        assert!(ok, "unexpected noise line {l:?}");
    }
}

#[test]
fn old_encoding_levels_and_ts() {
    let s = scenario("balanced").expect("scenario").with_requests(40);
    let out = run(
        &s,
        1,
        &Variant {
            old_encoding: true,
            ..Variant::default()
        },
    );
    let (objs, other) = parse_lenient(&out.epp_log);
    assert!(other.iter().all(|l| l.is_empty()));
    check_log_against_truth(&objs, &out.truth);
    for (o, _) in &objs {
        let ts = o["ts"].as_str().expect("string ts");
        assert_eq!(ts.len(), 20, "{ts}");
        let level = o["level"].as_str().expect("level");
        assert!(
            ["info", "debug", "Level(-2)", "Level(-3)", "Level(-4)"].contains(&level),
            "{level}"
        );
    }
    assert!(objs.iter().any(|(o, _)| o["level"] == "Level(-4)"));
}
