//! Filter parameters from the EPP's `EndpointPickerConfig` files and flags.
//!
//! Precedence, per deployment: flags over `--config DEPLOYMENT=FILE` over
//! `--config FILE` over the filter's defaults. Every result goes through the
//! filter core's validation, so a bad combination fails with the EPP's text.
//! Each parameter keeps its source (`flag`, `file`, `default`); the audit
//! then puts the values the log shows over files and defaults (never over a
//! flag), see [`gatecal_analysis::merge_log`].

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, bail};
use gatecal_analysis::{
    BlockSize, BlockSizeSource, ConfigSet, ParamSource, ProducerBlockSizes, SourcedConfig,
    filter_entries_from_yaml, producer_block_sizes,
};
use gatecal_filter::{Config, MissingSignal, Param};
use serde_json::{Map, Value};

/// The filter flags both binaries take.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct FilterArgs {
    /// The EPP's EndpointPickerConfig YAML, a ConfigMap holding it, a
    /// `kind: List` of those, or Helm values holding it: FILE for every
    /// deployment, DEPLOYMENT=FILE for one. Repeatable.
    #[arg(long = "config", value_name = "[DEPLOYMENT=]FILE")]
    pub config: Vec<String>,
    /// Override maxTTFTPenaltyMs (ms, 0 to 86400000).
    #[arg(long, value_name = "MS", value_parser = crate::bounds::parse_bar_ms)]
    pub max_ttft_penalty_ms: Option<f64>,
    /// Override of peakPrefillThroughput (tokens/s); each binary names its
    /// own flag for it (`gate-dist --peak-prefill-throughput`,
    /// `recommend --current-peak-prefill-throughput`).
    #[arg(skip)]
    pub peak_prefill_throughput: Option<f64>,
    /// Override affinityThreshold (0 to 1).
    #[arg(long, value_name = "FRACTION", value_parser = crate::bounds::parse_fraction)]
    pub affinity_threshold: Option<f64>,
    /// Override penaltyMode (static or matchedTokens).
    #[arg(long, value_name = "MODE")]
    pub penalty_mode: Option<String>,
    /// Override ttftSource (prefillThroughput or latencyPredictor).
    #[arg(long, value_name = "SOURCE")]
    pub ttft_source: Option<String>,
    /// Override maxInFlightRequestsDelta (a whole number, 0 or more).
    #[arg(long, value_name = "N", value_parser = crate::bounds::parse_delta)]
    pub max_in_flight_requests_delta: Option<i64>,
    /// Tokens per block of the prefix producers whose `-v=5` lines give
    /// matched tokens: `approximate=N` (approx-prefix-cache-producer, as it
    /// ran: after autoTune and its 64-token floor), `precise=N`
    /// (precise-prefix-cache-producer), or both, comma separated. Over
    /// --config's producer entries [default: from --config, else 64 and 16].
    #[arg(long, value_name = "KIND=TOKENS[,KIND=TOKENS]", value_parser = parse_block_sizes)]
    pub prefix_block_size: Option<BlockSizeFlag>,

    /// Replay with the v0.9.0/v0.10.0 semantics: absent in-flight tokens count
    /// as 0 (default: newer upstream, a side without signal keeps all).
    #[arg(long)]
    pub legacy_missing_signal: bool,
}

/// A flag's number: finite (`NaN`, `inf` and overflowing values such as
/// `1e400` are refused; JSON, and so the EPP's config, cannot hold them).
pub fn finite(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        Ok(_) => Err("not a finite number".into()),
        Err(e) => Err(e.to_string()),
    }
}

impl FilterArgs {
    /// The overrides as the plugin's parameters; a non-finite number (set
    /// by a caller that did not parse it with [`finite`]) is an error
    /// naming the parameter, not a `null` that would mean the default.
    fn overrides(&self) -> anyhow::Result<Map<String, Value>> {
        for (k, v) in [
            (Param::MaxTtftPenaltyMs, self.max_ttft_penalty_ms),
            (Param::PeakPrefillThroughput, self.peak_prefill_throughput),
            (Param::AffinityThreshold, self.affinity_threshold),
        ] {
            if let Some(x) = v.filter(|x| !x.is_finite()) {
                bail!("{k} {x} from flags: not a finite number");
            }
        }
        let mut m = Map::new();
        let mut put = |k: Param, v: Value| {
            m.insert(k.name().to_string(), v);
        };
        if let Some(v) = self.max_ttft_penalty_ms {
            put(Param::MaxTtftPenaltyMs, v.into());
        }
        if let Some(v) = self.peak_prefill_throughput {
            put(Param::PeakPrefillThroughput, v.into());
        }
        if let Some(v) = self.affinity_threshold {
            put(Param::AffinityThreshold, v.into());
        }
        if let Some(v) = &self.penalty_mode {
            put(Param::PenaltyMode, v.clone().into());
        }
        if let Some(v) = &self.ttft_source {
            put(Param::TtftSource, v.clone().into());
        }
        if let Some(v) = self.max_in_flight_requests_delta {
            put(Param::MaxInFlightRequestsDelta, v.into());
        }
        Ok(m)
    }

    fn finish(
        &self,
        base: &Config,
        source: &str,
        file_keys: &[String],
    ) -> anyhow::Result<SourcedConfig> {
        let over = self.overrides()?;
        let mut params = match base.to_parameters() {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        let flagged = !over.is_empty();
        params.extend(over.clone());
        let mut config = Config::from_value(&Value::Object(params))
            .map_err(|e| anyhow::anyhow!("{e}"))
            .with_context(|| {
                format!(
                    "filter config from {source}{}",
                    if flagged { " and flags" } else { "" }
                )
            })?;
        if self.legacy_missing_signal {
            config.missing_signal = MissingSignal::AsZero;
        }
        let source = match (source, flagged) {
            ("default", true) => "flags".to_string(),
            (s, true) => format!("{s}+flags"),
            (s, false) => s.to_string(),
        };
        let mut sc = SourcedConfig::new(source, config, ParamSource::Default);
        for (k, v) in sc.parameter_sources.iter_mut() {
            if over.contains_key(k) {
                *v = ParamSource::Flag;
            } else if file_keys.contains(k) {
                *v = ParamSource::File;
            }
        }
        if self.legacy_missing_signal {
            sc.parameter_sources
                .insert("missingSignal".into(), ParamSource::Flag);
        }
        Ok(sc)
    }

    /// The files `--config` reads.
    pub fn config_paths(&self) -> Vec<std::path::PathBuf> {
        self.config
            .iter()
            .map(|spec| match spec.split_once('=') {
                Some((d, p)) if !d.is_empty() && !p.is_empty() => p.into(),
                _ => spec.into(),
            })
            .collect()
    }

    /// The `--config` file that applies to `deployment`: its own
    /// `DEPLOYMENT=FILE`, else the `FILE` for every deployment.
    pub fn config_file(&self, deployment: &str) -> Option<&str> {
        let mut default = None;
        for spec in &self.config {
            match spec.split_once('=') {
                Some((d, p)) if d == deployment && !p.is_empty() => return Some(p),
                Some((d, _)) if !d.is_empty() => {}
                _ => default = Some(spec.as_str()),
            }
        }
        default
    }

    /// The deployments named by `--config DEPLOYMENT=FILE`.
    pub fn config_names(&self) -> Vec<&str> {
        self.config
            .iter()
            .filter_map(|spec| spec.split_once('=').map(|(d, _)| d))
            .filter(|d| !d.is_empty())
            .collect()
    }

    /// The prefix producers' block sizes per deployment (`""`: every
    /// other one): each `--config` file's producer entries
    /// ([`producer_block_sizes`]), then `--prefix-block-size` over them,
    /// else the upstream defaults.
    pub fn block_sizes(&self) -> anyhow::Result<BTreeMap<String, ProducerBlockSizes>> {
        let mut out = BTreeMap::new();
        out.insert(String::new(), ProducerBlockSizes::default());
        for spec in &self.config {
            let (dep, path) = match spec.split_once('=') {
                Some((d, p)) if !d.is_empty() && !p.is_empty() => (d.to_string(), p),
                _ => (String::new(), spec.as_str()),
            };
            let text = crate::config_file::read("--config", path)?;
            let mut b = producer_block_sizes(&text).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
            for s in [&mut b.approximate_producer, &mut b.precise_producer] {
                if s.source == BlockSizeSource::Config {
                    s.detail = format!("file:{path} {}", s.detail);
                }
            }
            out.insert(dep, b);
        }
        if let Some(f) = self.prefix_block_size {
            for b in out.values_mut() {
                for (given, s, kind) in [
                    (f.approximate, &mut b.approximate_producer, "approximate"),
                    (f.precise, &mut b.precise_producer, "precise"),
                ] {
                    if let Some(n) = given {
                        *s = BlockSize {
                            tokens: n,
                            source: BlockSizeSource::Flag,
                            detail: format!("--prefix-block-size {kind}={n}"),
                        };
                    }
                }
            }
        }
        Ok(out)
    }

    /// The config of every deployment.
    pub fn config_set(&self) -> anyhow::Result<ConfigSet> {
        let mut default = vec![(
            String::new(),
            self.finish(&Config::default(), "default", &[])?,
        )];
        let mut per: HashMap<String, Vec<(String, SourcedConfig)>> = HashMap::new();
        let mut seen_default_file = false;
        for spec in &self.config {
            let (dep, path) = match spec.split_once('=') {
                Some((d, p)) if !d.is_empty() && !p.is_empty() => (Some(d.to_string()), p),
                Some(_) => bail!("--config {spec:?}: expected FILE or DEPLOYMENT=FILE"),
                None => (None, spec.as_str()),
            };
            let text = crate::config_file::read("--config", path)?;
            let filters =
                filter_entries_from_yaml(&text).map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
            let many = filters.len() > 1;
            let mut list = Vec::new();
            for e in filters {
                let (name, config) = (e.name, e.config);
                let src = if many {
                    format!("file:{path}#{name}")
                } else {
                    format!("file:{path}")
                };
                let mut sc = self.finish(&config, &src, &e.keys)?;
                sc.era = e.era;
                list.push((name, sc));
            }
            match dep {
                Some(d) => {
                    per.insert(d, list);
                }
                None => {
                    if seen_default_file {
                        bail!("--config {path}: only one FILE without DEPLOYMENT= may be given");
                    }
                    seen_default_file = true;
                    default = list;
                }
            }
        }
        Ok(ConfigSet {
            default,
            per_deployment: per,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_flags_and_files() {
        let none = FilterArgs::default().config_set().unwrap();
        assert_eq!(none.lookup("x", None).source, "default");
        assert_eq!(none.lookup("x", None).parameters, Config::default());

        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("epp.yaml");
        std::fs::write(
            &f,
            "plugins:\n- type: prefix-cache-affinity-filter\n  parameters: {maxTTFTPenaltyMs: 5000}\n",
        )
        .unwrap();
        let args = FilterArgs {
            config: vec![format!("glm={}", f.display())],
            peak_prefill_throughput: Some(4000.0),
            ..FilterArgs::default()
        };
        let set = args.config_set().unwrap();
        let glm = set.lookup("glm", None);
        assert_eq!(glm.parameters.max_ttft_penalty_ms, 5000.0);
        assert_eq!(glm.parameters.peak_prefill_throughput, 4000.0);
        assert!(glm.source.starts_with("file:") && glm.source.ends_with("+flags"));
        let other = set.lookup("other", None);
        assert_eq!(other.source, "flags");
        assert_eq!(other.parameters.max_ttft_penalty_ms, 18000.0);
    }

    #[test]
    fn bad_flags_get_the_epps_text() {
        let args = FilterArgs {
            penalty_mode: Some("matchedTokens".into()),
            ttft_source: Some("latencyPredictor".into()),
            ..FilterArgs::default()
        };
        let e = format!("{:#}", args.config_set().unwrap_err());
        assert!(e.contains("requires ttftSource"), "{e}");
        let args = FilterArgs {
            config: vec!["/no/such/epp.yaml".into()],
            ..FilterArgs::default()
        };
        let e = format!("{:#}", args.config_set().unwrap_err());
        assert!(e.contains("/no/such/epp.yaml"), "{e}");
    }

    /// `NaN`, infinities and overflowing numbers are refused by the flags'
    /// parser, and by the config built from flags set in code: before,
    /// they became JSON `null`, that is the default, reported as "flags".
    #[test]
    fn non_finite_flags_are_errors_naming_the_parameter() {
        for s in ["NaN", "nan", "inf", "-inf", "+Infinity", "1e400", "-1e400"] {
            assert_eq!(finite(s), Err("not a finite number".into()), "{s}");
        }
        assert_eq!(finite("12.5"), Ok(12.5));
        assert!(finite("x").is_err());
        for (args, key) in [
            (
                FilterArgs {
                    max_ttft_penalty_ms: Some(f64::NAN),
                    ..FilterArgs::default()
                },
                "maxTTFTPenaltyMs NaN",
            ),
            (
                FilterArgs {
                    peak_prefill_throughput: Some(f64::INFINITY),
                    ..FilterArgs::default()
                },
                "peakPrefillThroughput inf",
            ),
            (
                FilterArgs {
                    affinity_threshold: Some(f64::NAN),
                    ..FilterArgs::default()
                },
                "affinityThreshold NaN",
            ),
        ] {
            let e = format!("{:#}", args.config_set().unwrap_err());
            assert!(e.contains(key) && e.contains("not a finite number"), "{e}");
        }
    }
}

/// `--prefix-block-size`: the producers' block sizes given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockSizeFlag {
    /// `approximate=N`.
    pub approximate: Option<i64>,
    /// `precise=N`.
    pub precise: Option<i64>,
}

/// Parses `approximate=N,precise=N` (either, or both, once each; N a whole
/// number of tokens from 1 to 1048576).
pub fn parse_block_sizes(s: &str) -> Result<BlockSizeFlag, String> {
    let mut out = BlockSizeFlag::default();
    for part in s.split(',') {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected approximate=TOKENS or precise=TOKENS"))?;
        let n: i64 = v
            .trim()
            .parse()
            .ok()
            .filter(|n| (1..=1 << 20).contains(n))
            .ok_or_else(|| format!("{part:?}: TOKENS must be a whole number from 1 to 1048576"))?;
        let slot = match k.trim() {
            "approximate" => &mut out.approximate,
            "precise" => &mut out.precise,
            other => {
                return Err(format!(
                    "{other:?}: expected approximate or precise (the prefix producers)"
                ));
            }
        };
        if slot.replace(n).is_some() {
            return Err(format!("{:?} given twice", k.trim()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod block_size_tests {
    use super::*;

    #[test]
    fn block_size_flag() {
        assert_eq!(
            parse_block_sizes("approximate=128,precise=32"),
            Ok(BlockSizeFlag {
                approximate: Some(128),
                precise: Some(32)
            })
        );
        assert_eq!(
            parse_block_sizes("precise=16").unwrap(),
            BlockSizeFlag {
                approximate: None,
                precise: Some(16)
            }
        );
        for bad in [
            "",
            "approximate",
            "approximate=0",
            "approximate=1.5",
            "exact=16",
            "precise=16,precise=32",
        ] {
            assert!(parse_block_sizes(bad).is_err(), "{bad}");
        }
    }
}
