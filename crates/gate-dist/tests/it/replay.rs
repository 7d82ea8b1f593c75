//! The config in force reproduces every logged outcome: on every simulator
//! scenario and variant, seeds 1–4, the replay at the config read from the
//! log agrees with the log on every decision with a known gate input, and
//! releases exactly the logged count. Small runs (150 requests) keep it fast;
//! the 5 s bar's scenario runs 800, enough for logged holds that censor the
//! reconstruction.

use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, GateDistReport, InputSummary, ParamSource,
    SourcedConfig,
};
use gatecal_parser::{ParseOptions, parse_slice};
use gatecal_sim::{Variant, run, scenario, scenario_names};

fn audit(bytes: &[u8], configs: ConfigSet) -> GateDistReport {
    let parsed = parse_slice("epp.log", bytes, &ParseOptions::default()).expect("parse");
    let mut g = GateDist::new(GateDistOptions::default(), configs);
    for d in parsed.decisions() {
        g.push(DecisionInput::from(d));
    }
    g.finish(InputSummary::default())
}

fn assert_reproduces(what: &str, r: &GateDistReport) {
    assert!(!r.deployments.is_empty(), "{what}: no deployment");
    for d in &r.deployments {
        let p = &d.stats.replay;
        assert_eq!(
            p.agreed, p.decisions,
            "{what} {}: replay disagrees on {:?} ({:?})",
            d.name, p.disagreements, p.cause
        );
        assert_eq!(
            p.logged_released, p.replayed_released,
            "{what} {}: releases",
            d.name
        );
        assert_eq!(p.logged_released, d.stats.released, "{what} {}", d.name);
        assert_eq!(p.cause, None, "{what} {}", d.name);
    }
}

/// The scenario whose holds censor the reconstruction: its 5 s bar sits
/// within the reconstruction's error of queues its peaks reach.
const CENSORING: &str = "glm-like-v1";

/// 150 requests, or 800 for the 5 s bar: at 150 none of its holds is
/// reconstructed above the bar; at 800, 4–53 per seed are, over the five
/// variants (9–20 per run at the default size).
fn requests(name: &str) -> u64 {
    if name == CENSORING { 800 } else { 150 }
}

fn variants() -> [(&'static str, Variant); 5] {
    [
        ("plain", Variant::default()),
        (
            "prefix-timestamps",
            Variant {
                timestamps: true,
                prefix: true,
                ..Variant::default()
            },
        ),
        (
            "noise",
            Variant {
                noise: true,
                ..Variant::default()
            },
        ),
        (
            "old-encoding",
            Variant {
                old_encoding: true,
                ..Variant::default()
            },
        ),
        (
            "full-dumps",
            Variant {
                full_dumps: true,
                ..Variant::default()
            },
        ),
    ]
}

#[test]
fn the_config_read_from_the_log_reproduces_every_outcome() {
    let (mut replayed, mut released) = (0, 0);
    for name in scenario_names() {
        let s = scenario(name)
            .expect("scenario")
            .with_requests(requests(name));
        for seed in 1..=4 {
            let mut censored = 0;
            for (v, variant) in variants() {
                let out = run(&s, seed, &variant);
                let what = format!("{name} seed {seed} {v}");
                // As a user runs it: no config, the log shows what it can.
                let r = audit(&out.epp_log, ConfigSet::default());
                assert_reproduces(&what, &r);
                replayed += r.overall.stats.replay.decisions;
                released += r.overall.stats.released;
                censored += r.overall.stats.censoring.moved;
                // With the scenario's own config.
                let config = s.deployments[0].primary_config();
                let set = ConfigSet {
                    default: vec![(
                        String::new(),
                        SourcedConfig::new("test", config, ParamSource::File),
                    )],
                    ..ConfigSet::default()
                };
                assert_reproduces(
                    &format!("{what} (scenario config)"),
                    &audit(&out.epp_log, set),
                );
            }
            // The 5 s bar's runs also exercise the other constraint: holds
            // whose reconstruction the config would release, censored.
            if *name == CENSORING {
                assert!(censored > 0, "{name} seed {seed}: nothing censored");
            }
        }
    }
    // The runs also exercise logged releases.
    assert!(replayed > 1000, "{replayed} decisions replayed");
    assert!(released > 0, "{released} released");
}
