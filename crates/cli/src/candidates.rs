//! `--candidate-config` and `--what-if`: configs to replay beside the one in
//! force, in both binaries.

use anyhow::{Context, bail};
use gatecal_analysis::{CandidateConfig, CandidateSource, filters_from_yaml};
use gatecal_filter::{Config, Param};
use serde_json::{Map, Value};

/// Parameters `--what-if` may set.
pub const WHAT_IF_PARAMS: [Param; 5] = [
    Param::PeakPrefillThroughput,
    Param::MaxTtftPenaltyMs,
    Param::PenaltyMode,
    Param::AffinityThreshold,
    Param::MaxInFlightRequestsDelta,
];

/// The candidate flags both binaries take.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CandidateArgs {
    /// A whole EPP config to compare (same shapes as --config): one row
    /// beside `current`. The instance of the deployment's filter name is
    /// used, else the file's first. Repeatable.
    #[arg(long = "candidate-config", value_name = "FILE")]
    pub candidate_config: Vec<String>,
    /// Parameters set over each deployment's config, one row beside
    /// `current`: 'peakPrefillThroughput=3000,maxTTFTPenaltyMs=1500[,penaltyMode=matchedTokens]'.
    /// Repeatable.
    #[arg(long = "what-if", value_name = "KEY=VALUE,...")]
    pub what_if: Vec<String>,
}

/// Parses one `--what-if` list into EPP parameters.
pub fn parse_what_if(spec: &str) -> anyhow::Result<Map<String, Value>> {
    let mut m = Map::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once('=') else {
            bail!("--what-if {spec:?}: expected KEY=VALUE, got {part:?}");
        };
        let (k, v) = (k.trim(), v.trim());
        let Some(param) = Param::from_name(k).filter(|p| WHAT_IF_PARAMS.contains(p)) else {
            bail!(
                "--what-if {spec:?}: unknown parameter {k:?} (one of {})",
                WHAT_IF_PARAMS.map(Param::name).join(", ")
            );
        };
        let value = match param {
            Param::PenaltyMode => Value::String(v.to_string()),
            Param::MaxInFlightRequestsDelta => Value::from(
                v.parse::<i64>()
                    .with_context(|| format!("--what-if {k}={v}: not an integer"))?,
            ),
            // A time with a unit (`5s`); a bare number is ms, as below.
            Param::MaxTtftPenaltyMs if v.parse::<f64>().is_err() => Value::from(
                crate::bounds::parse_bar_ms(v).map_err(|e| anyhow::anyhow!("--what-if {k}={e}"))?,
            ),
            _ => {
                let x: f64 = v
                    .parse()
                    .with_context(|| format!("--what-if {k}={v}: not a number"))?;
                anyhow::ensure!(x.is_finite(), "--what-if {k}={v}: not a finite number");
                // The flags' ranges: a row at a peak or bar out of them
                // means nothing (the TTFT overflows or every request is held).
                let range = match param {
                    Param::PeakPrefillThroughput => Some(crate::bounds::parse_peak(v)),
                    Param::MaxTtftPenaltyMs if x >= 0.0 => Some(crate::bounds::parse_bar_ms(v)),
                    _ => None,
                };
                if let Some(Err(e)) = range {
                    bail!("--what-if {k}={e}");
                }
                Value::from(x)
            }
        };
        if m.insert(k.to_string(), value).is_some() {
            bail!("--what-if {spec:?}: {k} given twice");
        }
    }
    anyhow::ensure!(!m.is_empty(), "--what-if {spec:?}: no parameter");
    // The EPP's validation, over the defaults (each deployment's config is
    // checked again when the row is replayed).
    let mut base = match Config::default().to_parameters() {
        Value::Object(b) => b,
        _ => Map::new(),
    };
    base.extend(m.clone());
    Config::from_value(&Value::Object(base))
        .map_err(|e| anyhow::anyhow!("--what-if {spec:?}: {e}"))?;
    Ok(m)
}

impl CandidateArgs {
    /// The candidates, in the order given: config files, then what-ifs.
    pub fn candidates(&self) -> anyhow::Result<Vec<CandidateConfig>> {
        crate::bounds::check_list("--candidate-config", self.candidate_config.len())?;
        crate::bounds::check_list("--what-if", self.what_if.len())?;
        let mut out = Vec::new();
        for path in &self.candidate_config {
            let text = crate::config_file::read("--candidate-config", path)?;
            let list = filters_from_yaml(&text).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
            out.push(CandidateConfig {
                label: format!("file:{path}"),
                source: CandidateSource::File(list),
            });
        }
        for spec in &self.what_if {
            out.push(CandidateConfig {
                label: format!("what-if {spec}"),
                source: CandidateSource::Params(parse_what_if(spec)?),
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_if_lists() {
        let m = parse_what_if(
            "peakPrefillThroughput=3000, maxTTFTPenaltyMs=1500,penaltyMode=matchedTokens",
        )
        .unwrap();
        assert_eq!(m["peakPrefillThroughput"], 3000.0);
        assert_eq!(m["penaltyMode"], "matchedTokens");
        let m = parse_what_if("maxTTFTPenaltyMs=5s").unwrap();
        assert_eq!(m["maxTTFTPenaltyMs"], 5000.0);
        for bad in [
            "peak=3",
            "maxTTFTPenaltyMs",
            "maxTTFTPenaltyMs=-1",
            "maxTTFTPenaltyMs=NaN",
            "penaltyMode=fast",
            "maxTTFTPenaltyMs=1,maxTTFTPenaltyMs=2",
            "peakPrefillThroughput=1e-320",
            "peakPrefillThroughput=0",
            "peakPrefillThroughput=2e9",
            "maxTTFTPenaltyMs=1e300",
            "",
        ] {
            assert!(parse_what_if(bad).is_err(), "{bad}");
        }
        let e = parse_what_if("maxTTFTPenaltyMs=-1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("maxTTFTPenaltyMs must be >= 0"), "{e}");
        let e = parse_what_if("peakPrefillThroughput=1e-320")
            .unwrap_err()
            .to_string();
        assert!(e.contains("from 1 to 1000000000 tok/s"), "{e}");
    }

    #[test]
    fn candidate_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.yaml");
        std::fs::write(
            &f,
            "plugins:\n- name: a\n  type: prefix-cache-affinity-filter\n  parameters: {maxTTFTPenaltyMs: 700}\n",
        )
        .unwrap();
        let args = CandidateArgs {
            candidate_config: vec![f.display().to_string()],
            what_if: vec!["maxTTFTPenaltyMs=900".into()],
        };
        let c = args.candidates().unwrap();
        assert_eq!(c.len(), 2);
        let got = c[0].resolve(&Config::default(), Some("a")).unwrap();
        assert_eq!(got.max_ttft_penalty_ms, 700.0);
        let got = c[1].resolve(&Config::default(), None).unwrap();
        assert_eq!(got.max_ttft_penalty_ms, 900.0);
        assert_eq!(got.peak_prefill_throughput, 15928.0);
    }
}
