//! Command-line flags, validated into the audit's options.

use std::path::PathBuf;

use clap::Parser;
use gatecal_analysis::{GateDistOptions, ReconstructOptions, WhatIfSpec, matched_tokens_specs};
use gatecal_cli::bounds::{MAX_BINS, check_list, parse_window};
use gatecal_cli::candidates::CandidateArgs;
use gatecal_cli::duration::parse_seconds;
use gatecal_cli::filter_args::FilterArgs;
use gatecal_cli::pipeline::InputArgs;
use gatecal_filter::PenaltyMode;

const EXAMPLES: &str = "\
Examples:
  Capture every EPP replica's whole log (llm-d-router-gateway chart, at -v=4):
    kubectl logs -l llm-d-router-gateway=<release>-epp -c epp --tail=-1 \\
        --prefix --timestamps --max-log-requests 10 > epp.log

  Audit it (a table on a terminal, JSON in a pipe):
    gate-dist epp.log

  Or let gate-dist run kubectl logs itself (everything after --kubectl is kubectl's):
    gate-dist --since 24h --kubectl -n <ns> -l llm-d-router-gateway=<release>-epp

  A Markdown report for a pull request, with the SVG histogram:
    gate-dist epp.log --config epp-config.yaml -o report.md --svg gate.svg

  Hourly drift of a folder of logs, as CSV:
    gate-dist logs/ --window 1h -o drift.csv

  Two deployments, each named and with its own config:
    gate-dist prod=epp-a.log.gz staging=epp-b.log.gz --config prod=prod.yaml

  Compare a candidate config and a what-if with the config in force:
    gate-dist epp.log --candidate-config new-epp-config.yaml \\
        --what-if 'peakPrefillThroughput=3000,maxTTFTPenaltyMs=1500'

  Before and after a config change, with the significance of each difference:
    gate-dist --compare before.log after.log -o change.md
    gate-dist epp.log --compare-at 2026-08-21T14:00:00Z

  Watch a deployment live: the last 15 minutes, every 30 s:
    kubectl logs -f -l <epp-selector> --prefix --timestamps | gate-dist --follow -

  Keep the decisions, replay them later at another peak throughput:
    gate-dist epp.log --emit-decisions d.jsonl
    gate-dist d.jsonl --what-if-peak 3000,6000

  The same in one pipe (the first report to a file):
    gate-dist epp.log --emit-decisions - -o first.json | gate-dist - --what-if-peak 3000

  Shards merged later (hourly partial reports into a day's report):
    gate-dist epp-14h.log --emit-partial parts/14h.part
    gate-dist merge parts/ -o day.md
    gate-dist plan --window 1h --warm-up 5m logs/*.log.gz   # the shards of a scale-out run

  Install shell completion and the man page:
    gate-dist --generate complete-bash > ~/.local/share/bash-completion/completions/gate-dist
    gate-dist --generate man > ~/.local/share/man/man1/gate-dist.1

Exit codes: 0 success (also when the reader closes the pipe), 1 --strict found
a malformed line, 2 usage or I/O error, 3 no filter decision in the input
(the empty report is written, stderr says the likely cause), 101 internal error
(a gatecal bug).";

/// Audit the TTFT load gate of the llm-d router's prefix-cache-affinity-filter
/// from EPP logs (at -v=4) or decision records: the gate input distribution,
/// how often the gate released, how often requests stayed pinned behind a
/// much less loaded endpoint, and what other thresholds or the matched-tokens
/// rule would have done.
#[derive(Parser, Debug)]
#[command(
    name = "gate-dist",
    version = gatecal_cli::term::VERSION,
    max_term_width = 100,
    after_help = "Examples and details: gate-dist --help",
    after_long_help = EXAMPLES,
    mut_arg("inputs", |a| a.required_unless_present_any(["compare"]))
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub filter: FilterArgs,

    /// Configs replayed beside the current one.
    #[command(flatten)]
    pub candidates: CandidateArgs,

    /// Override peakPrefillThroughput of the config (tokens/s).
    #[arg(long, value_name = "TOK_PER_S", value_parser = gatecal_cli::bounds::parse_peak)]
    pub peak_prefill_throughput: Option<f64>,

    /// Longest time a carried-forward endpoint load is trusted when
    /// reconstructing the gate input (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_seconds)]
    pub max_staleness: f64,

    /// Lower edge of "pinned worse": held while the gate input was in [MS, bar).
    #[arg(long, value_name = "MS", default_value_t = 5000.0, value_parser = gatecal_cli::bounds::parse_bar_ms)]
    pub pinned_worse_min: f64,

    /// Static bars to replay (ms, comma-separated).
    #[arg(
        long,
        value_name = "MS,...",
        value_delimiter = ',',
        default_value = "1000,2000,5000,10000,18000,30000",
        value_parser = gatecal_cli::bounds::parse_bar_ms
    )]
    pub what_if_bar: Vec<f64>,

    /// Peak prefill throughputs to replay at the deployment's bar (tok/s, comma-separated).
    #[arg(long, value_name = "TOK_PER_S,...", value_delimiter = ',', value_parser = gatecal_cli::bounds::parse_peak)]
    pub what_if_peak: Vec<f64>,

    /// Count only the decisions logged at or after TIME: an RFC 3339 time
    /// (2026-08-21T14:00:00Z), a date (2026-08-21, midnight UTC), or a
    /// duration before now, as `kubectl logs --since` (30m, 2h, 1h30m), or
    /// a time from the input's first or last decision (start+10m, end-1h).
    ///
    /// Durations count back from now, not from the end of the log: for an
    /// older capture, give end-30m (the input is then read twice) or times. Earlier lines are still read, so the
    /// first decisions counted are reconstructed from the loads the earlier
    /// lines showed.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,

    /// Count only the decisions logged before TIME (as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,

    /// Also report per time window of this length, to show drift (e.g. 1h);
    /// with --follow, the span of log time each report covers (default 15m).
    #[arg(long, value_name = "DURATION", value_parser = parse_window)]
    pub window: Option<f64>,

    /// Output format [default: from -o's extension, else table on a
    /// terminal, json otherwise].
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub format: Option<gatecal_cli::output::FormatArg>,

    /// Exit 4 when EXPR holds, the report still written: FIGURE OP NUMBER
    /// over each deployment's figures as named in the JSON
    /// ('pinned_share > 0.10', 'released_share < 0.01'), 'finding:ID', or
    /// 'severity >= warning'. Repeatable; the gates that held are listed on
    /// stderr with their values.
    #[arg(long, value_name = "EXPR", value_parser = gatecal_cli::fail_if::parse_gate_dist)]
    pub fail_if: Vec<gatecal_cli::fail_if::Gate>,

    /// Write the report to FILE instead of stdout. Without --format, the
    /// extension picks the format: .md, .json, .csv, .txt (a table).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Draw tables at their full width, even on a narrower terminal.
    #[arg(long)]
    pub wide: bool,

    /// Write an SVG histogram of the gate input with the bar marked (with
    /// several deployments: the overall one to FILE, and one per deployment
    /// beside it as STEM-DEPLOYMENT.svg).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// The SVG's vertical scale: linear, or log (log10(1 + count)) to read
    /// the tail of the distribution.
    #[arg(long, value_name = "SCALE", default_value = "linear", value_parser = ["linear", "log"])]
    pub svg_scale: String,

    /// Histogram bins (2 to 10000).
    #[arg(long, value_name = "N", default_value_t = 40)]
    pub bins: usize,

    /// Keep reading the inputs as they grow (stdin until it closes) and
    /// print the report every --every over the last --window of log time
    /// (default 15m): a redrawn table on a terminal, one JSON document a
    /// line with --format json. SIGINT prints the last report and exits 0.
    #[arg(long)]
    pub follow: bool,

    /// With --follow: serve the decisions read as Prometheus metrics at
    /// http://ADDR/metrics (HOST:PORT, or :PORT for every interface).
    #[arg(long, value_name = "ADDR", requires = "follow")]
    pub serve_metrics: Option<String>,

    /// With --follow: how often the report is printed (e.g. 30s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_seconds)]
    pub every: f64,

    // Partial reports (docs/partial-report.md, docs/scale-out.md).
    /// Also write the partial report (gatecal.partial/v1, one line of JSON)
    /// to FILE, for `gate-dist merge`; with -, to stdout, and the report is
    /// then written only with -o.
    #[arg(long, value_name = "FILE", conflicts_with = "follow")]
    pub emit_partial: Option<PathBuf>,

    /// Before and after a change: run the same analysis (the same flags)
    /// on BASELINE and on CANDIDATE, each a file, a folder or `-` (at most
    /// one `-`), and report them side by side per deployment with the
    /// differences and whether each is significant. --fail-if reads the
    /// candidate's figures.
    #[arg(
        long,
        num_args = 2,
        value_names = ["BASELINE", "CANDIDATE"],
        conflicts_with_all = ["inputs", "compare_at"]
    )]
    pub compare: Option<Vec<String>>,

    /// Before and after a change in one input: the decisions before TIME
    /// are the baseline, those from TIME on the candidate (TIME as --since
    /// takes: 2026-08-21T14:00:00Z, end-1h, start+30m).
    #[arg(long, value_name = "TIME")]
    pub compare_at: Option<String>,
}

/// The flags a comparison cannot take: they write or read something per
/// run that has no place in a side-by-side report.
pub const NOT_WITH_COMPARE: [&str; 8] = [
    "--follow",
    "--serve-metrics",
    "--window",
    "--svg",
    "--emit-decisions",
    "--list-deployments",
    "--kubectl",
    "--generate",
];

impl Args {
    /// Whether `--compare` or `--compare-at` asks for a comparison.
    pub fn comparing(&self) -> bool {
        self.compare.is_some() || self.compare_at.is_some()
    }

    /// The flags given that a comparison cannot take.
    pub fn not_with_compare(&self) -> Vec<&'static str> {
        let given = [
            self.follow,
            self.serve_metrics.is_some(),
            self.window.is_some(),
            self.svg.is_some(),
            self.input.emit_decisions.is_some(),
            self.input.list_deployments,
            self.input.kubectl.is_some(),
            self.input.generate.is_some(),
        ];
        NOT_WITH_COMPARE
            .iter()
            .zip(given)
            .filter(|(_, g)| *g)
            .map(|(f, _)| *f)
            .collect()
    }
}

impl Args {
    /// The audit's options; `span` is the inputs' first and last decision
    /// times, for `--since`/`--until` that count from them.
    pub fn options(
        &self,
        span: Option<gatecal_cli::time::Span>,
    ) -> anyhow::Result<GateDistOptions> {
        check_list("--what-if-bar", self.what_if_bar.len())?;
        check_list("--what-if-peak", self.what_if_peak.len())?;
        let mut what_if: Vec<WhatIfSpec> = Vec::new();
        for &b in &self.what_if_bar {
            anyhow::ensure!(b >= 0.0 && b.is_finite(), "--what-if-bar {b}: must be >= 0");
            what_if.push(WhatIfSpec {
                mode: PenaltyMode::Static,
                max_ttft_penalty_ms: Some(b),
                peak_prefill_throughput: None,
            });
        }
        for &p in &self.what_if_peak {
            anyhow::ensure!(p > 0.0 && p.is_finite(), "--what-if-peak {p}: must be > 0");
            what_if.push(WhatIfSpec {
                mode: PenaltyMode::Static,
                max_ttft_penalty_ms: None,
                peak_prefill_throughput: Some(p),
            });
        }
        what_if.extend(matched_tokens_specs());
        anyhow::ensure!(
            self.pinned_worse_min.is_finite(),
            "--pinned-worse-min must be a number"
        );
        anyhow::ensure!(
            (2..=MAX_BINS).contains(&self.bins),
            "--bins {}: give 2 to {MAX_BINS}",
            self.bins
        );
        let time_range =
            gatecal_cli::time::time_range_in(self.since.as_deref(), self.until.as_deref(), span)?;
        Ok(GateDistOptions {
            reconstruct: ReconstructOptions {
                max_staleness_s: self.max_staleness,
                ..ReconstructOptions::default()
            },
            pinned_worse_min_ms: self.pinned_worse_min,
            what_if,
            candidates: self.candidates.candidates()?,
            window_s: self.window,
            histogram_bins: self.bins,
            time_range,
            block_sizes: self.filter.block_sizes()?,
        })
    }
}
