//! Command-line flags.

use std::path::PathBuf;

use clap::Parser;
use gatecal_cli::bounds::parse_window;
use gatecal_cli::candidates::CandidateArgs;
use gatecal_cli::duration::parse_seconds;
use gatecal_cli::filter_args::FilterArgs;
use gatecal_cli::pipeline::InputArgs;

const EXAMPLES: &str = "\
Examples:
  Calibrate from the EPP's log and the vLLM pods' logs:
    recommend epp.log vllm-logs/

  The same read with kubectl logs (one -l for the EPP pods, one for the vLLM pods):
    recommend --since 24h --kubectl -n <ns> -l llm-d-router-gateway=<release>-epp -l <vllm-selector>

  With the config in force and a calibration run's output:
    recommend epp.log --config epp-config.yaml --calibration calib.txt

  When the true peak prefill throughput is known (tokens/s):
    recommend epp.log --known-peak 16000

  A Markdown report for a pull request:
    recommend epp.log vllm-logs/ -o recommend.md

  Shards merged later (hourly partial reports into a day's report):
    recommend --emit-partial - epp-14h.log vllm-14h/ > parts/14h.part
    recommend merge parts/ -o day.md

  Watch it live: the last 15 minutes of both logs, every 30 s:
    recommend --follow epp.log vllm.log

  Install shell completion and the man page:
    recommend --generate complete-bash > ~/.local/share/bash-completion/completions/recommend
    recommend --generate man > ~/.local/share/man/man1/recommend.1

Exit codes: 0 success (also when the reader closes the pipe), 1 --strict found
a malformed line, 2 usage or I/O error, 3 no filter decision and no vLLM stats line in the input
(the empty report is written, stderr says the likely cause), 101 internal error
(a gatecal bug).";

/// Estimate each deployment's peak prefill throughput and break-even bar from
/// EPP logs, vLLM logs and calibration output, and print the
/// prefix-cache-affinity-filter config to apply (static and matchedTokens),
/// with the release rate each would have produced on the same decisions.
#[derive(Parser, Debug)]
#[command(
    name = "recommend",
    version = gatecal_cli::term::VERSION,
    max_term_width = 100,
    after_help = "Examples and details: recommend --help",
    after_long_help = EXAMPLES
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    /// The filter config in force (`--config`, overrides).
    #[command(flatten)]
    pub filter: FilterArgs,

    /// Configs replayed beside the current one.
    #[command(flatten)]
    pub candidates: CandidateArgs,

    /// Write the deployment's --config file back with the recommended
    /// parameters changed and everything else kept (same shape: raw,
    /// ConfigMap, List or Helm values); without --config, a minimal
    /// EndpointPickerConfig. DEPLOYMENT=FILE for one of several. Repeatable.
    #[arg(long, value_name = "[DEPLOYMENT=]FILE")]
    pub emit_config: Vec<String>,

    /// Write the router's peak calibration record (JSON,
    /// `prefillCalibrationFile`) from the passive peak estimate: status OK
    /// with 10 or more samples, model revision and image digest left empty.
    /// Refused when the peak is the config's or --known-peak's.
    /// Needs --chunk-tokens. DEPLOYMENT=FILE for one of several.
    #[arg(long, value_name = "[DEPLOYMENT=]FILE", requires = "chunk_tokens")]
    pub emit_calibration: Option<String>,

    /// The engine's prefill chunk (vLLM `max_num_batched_tokens`), written
    /// as the record's `chunk_tokens`: the logs do not carry it.
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(i64).range(1..))]
    pub chunk_tokens: Option<i64>,

    /// The record's `fingerprint`, to match the filter's
    /// `prefillCalibrationFingerprint` (default `gatecal-passive:DEPLOYMENT`).
    #[arg(long, value_name = "STRING")]
    pub calibration_fingerprint: Option<String>,

    /// What the choice by predicted TTFT minimises: the p50, p90 or p99 of
    /// the TTFT the replay predicts, or its mean.
    #[arg(long, value_enum, default_value = "p90")]
    pub objective: ObjectiveArg,

    /// Paste (and --emit-config) the row labelled LABEL instead of the
    /// recommendation: a label of the configs table (`corrected peak`,
    /// `static 5 s`, a --what-if's text) or a row kind (`corrected_peak`).
    #[arg(long, value_name = "LABEL")]
    pub choose: Option<String>,

    /// Paste (and --emit-config) a config of this penaltyMode family: the
    /// recommendation when it is of that family, else that family's row.
    #[arg(long, value_enum)]
    pub mode: Option<ModeArg>,

    /// The deployment's true peak prefill throughput, if you know it (tok/s):
    /// used before any estimate. (`--peak-prefill-throughput`, its old
    /// name, still works and warns: in gate-dist that name overrides the
    /// config's peak, which is recommend's --current-peak-prefill-throughput.)
    #[arg(
        long = "known-peak",
        alias = "peak-prefill-throughput",
        value_name = "TOK_PER_S",
        value_parser = gatecal_cli::bounds::parse_peak
    )]
    pub known_peak: Option<f64>,

    /// Override peakPrefillThroughput of the config in force (tok/s).
    #[arg(long, value_name = "TOK_PER_S", value_parser = gatecal_cli::bounds::parse_peak)]
    pub current_peak_prefill_throughput: Option<f64>,

    /// Calibration output: `PEAK_PREFILL_THROUGHPUT=` lines, or TTFT samples
    /// of cold prompts (CSV or JSON lines with prompt tokens and TTFT).
    /// FILE for every deployment, DEPLOYMENT=FILE for one. Repeatable.
    #[arg(long, value_name = "[DEPLOYMENT=]FILE")]
    pub calibration: Vec<String>,

    /// Most MiB of Prometheus query_range responses read, all files
    /// together, after decompression (1 to 4096): the samples are held for
    /// the estimate, so this bounds their memory (about 50 bytes a sample).
    #[arg(long, value_name = "MIB", default_value_t = gatecal_analysis::DEFAULT_MAX_PROMETHEUS_MIB, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_prometheus_mib: u64,

    /// Count only the decisions logged at or after TIME: an RFC 3339 time (2026-08-21T14:00:00Z), a date (2026-08-21,
    /// midnight UTC), a duration before now, as `kubectl logs --since`
    /// (30m, 2h, 1h30m), or a time from the input's first or last decision
    /// (start+10m, end-1h).
    ///
    /// Durations count back from now, not from the end of the log: for an
    /// older capture, give end-30m (the input is then read twice) or times. Earlier decisions are still read, so the
    /// first decisions counted are reconstructed from the loads the earlier
    /// lines showed. The peak is estimated from every vLLM stats line (the
    /// engines' capacity; vLLM's own lines often carry no year).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,

    /// Count only the decisions logged before TIME (as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,

    /// Break-even bar per time window of this length, to show drift (e.g. 1h);
    /// with --follow, the span of log time each report covers (default 15m).
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub window: Option<f64>,

    /// Keep reading the inputs as they grow (stdin until it closes) and
    /// print the report every --every over the last --window of log time
    /// (default 15m), EPP decisions and vLLM stats lines alike: a redrawn
    /// table on a terminal, one JSON document a line with --format json.
    /// SIGINT prints the last report and exits 0.
    #[arg(long)]
    pub follow: bool,

    /// With --follow: how often the report is printed (e.g. 30s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_seconds)]
    pub every: f64,

    /// Longest time a carried-forward endpoint load is trusted (e.g. 30s).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_seconds)]
    pub max_staleness: f64,

    /// Lower edge of "pinned worse" (ms).
    #[arg(long, value_name = "MS", default_value_t = 5000.0, value_parser = gatecal_cli::bounds::parse_bar_ms)]
    pub pinned_worse_min: f64,

    /// Output format [default: from -o's extension, else table on a
    /// terminal, json otherwise].
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub format: Option<gatecal_cli::output::FormatArg>,

    /// Exit 4 when EXPR holds, the report still written: FIGURE OP NUMBER
    /// over each deployment's figures as named in the JSON
    /// ('pinned_share > 0.10', 'released_share < 0.01'), 'finding:ID', or
    /// 'severity >= warning'. Repeatable; the gates that held are listed on
    /// stderr with their values.
    #[arg(long, value_name = "EXPR", value_parser = gatecal_cli::fail_if::parse_recommend)]
    pub fail_if: Vec<gatecal_cli::fail_if::Gate>,

    /// Write the report to FILE instead of stdout. Without --format, the
    /// extension picks the format: .md, .json, .csv, .txt (a table).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Draw tables at their full width, even on a narrower terminal.
    #[arg(long)]
    pub wide: bool,

    /// Write an SVG of each config row's predicted TTFT (p50, p90 with
    /// its 90 % interval) beside the observed TTFT (with several
    /// deployments: all of them to FILE, and one per deployment beside it
    /// as STEM-DEPLOYMENT.svg). The Markdown report links them.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    // Partial reports (docs/partial-report.md, docs/scale-out.md).
    /// Also write the partial report (gatecal.partial/v1, one line of JSON)
    /// to FILE, for `recommend merge`; with -, to stdout, and the report is
    /// then written only with -o. The report is then the one the partial
    /// merges into (the same as without it).
    #[arg(long, value_name = "FILE")]
    pub emit_partial: Option<PathBuf>,
}

/// `--objective`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ObjectiveArg {
    /// The median predicted TTFT.
    P50,
    /// The 90th percentile.
    P90,
    /// The 99th percentile.
    P99,
    /// The mean.
    Mean,
}

impl From<ObjectiveArg> for gatecal_analysis::Objective {
    fn from(o: ObjectiveArg) -> Self {
        match o {
            ObjectiveArg::P50 => gatecal_analysis::Objective::P50,
            ObjectiveArg::P90 => gatecal_analysis::Objective::P90,
            ObjectiveArg::P99 => gatecal_analysis::Objective::P99,
            ObjectiveArg::Mean => gatecal_analysis::Objective::Mean,
        }
    }
}

/// `--mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeArg {
    /// penaltyMode static.
    Static,
    /// penaltyMode matchedTokens.
    #[value(name = "matchedTokens", alias = "matched-tokens")]
    MatchedTokens,
}

impl From<ModeArg> for gatecal_analysis::PenaltyMode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Static => gatecal_analysis::PenaltyMode::Static,
            ModeArg::MatchedTokens => gatecal_analysis::PenaltyMode::MatchedTokens,
        }
    }
}
