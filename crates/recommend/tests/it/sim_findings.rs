//! What the findings tests share: a simulator scenario shortened, its own
//! config as a `--config` file gives it, its logs parsed, and both reports
//! built from them in process.

use std::collections::HashMap;

use gatecal_analysis::findings::Finding;
use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, GateDistReport, InputSummary, ParamSource,
    Recommend, RecommendOptions, RecommendReport, SourcedConfig,
};
use gatecal_parser::{Item, ParseOptions, parse_slice};
use gatecal_sim::{Scenario, SimOutput, scenario};

pub fn short(name: &str, seconds: f64) -> Scenario {
    scenario(name).expect(name).with_duration(seconds)
}

/// The scenario's own filter config, as a `--config` file would give it.
pub fn config_of(s: &Scenario) -> ConfigSet {
    let c = s.deployments[0].primary_config();
    ConfigSet {
        default: vec![(
            String::new(),
            SourcedConfig::new("file:epp.yaml", c, ParamSource::File),
        )],
        per_deployment: HashMap::new(),
    }
}

/// The run's EPP log parsed, and its vLLM logs with `vllm`.
pub fn items(out: &SimOutput, vllm: bool) -> Vec<Item> {
    let mut v = parse_slice("epp.log", &out.epp_log, &ParseOptions::default())
        .expect("parse")
        .items;
    if vllm {
        for (pod, bytes) in &out.vllm_logs {
            let p = parse_slice(&format!("vllm/{pod}.log"), bytes, &ParseOptions::default());
            v.extend(p.expect("parse").items);
        }
    }
    v
}

/// gate-dist over the run's EPP log.
pub fn gate_dist_report(out: &SimOutput, set: ConfigSet) -> GateDistReport {
    let mut g = GateDist::new(GateDistOptions::default(), set);
    for i in items(out, false) {
        if let Item::Decision(d) = i {
            g.push(DecisionInput::from(&*d));
        }
    }
    g.finish(InputSummary::default())
}

/// recommend over the run's EPP and vLLM logs.
pub fn recommend_report(out: &SimOutput, set: ConfigSet) -> RecommendReport {
    let mut r = Recommend::new(RecommendOptions::default(), set);
    for i in items(out, true) {
        match i {
            Item::Decision(d) => r.push_decision(DecisionInput::from(&*d)),
            Item::VllmStats(s) => r.push_vllm(&s),
        }
    }
    r.finish(InputSummary::default())
}

pub fn ids_of(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.id).collect()
}

pub fn find<'a>(f: &'a [Finding], id: &str) -> &'a Finding {
    f.iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("{id} not in {f:#?}"))
}
