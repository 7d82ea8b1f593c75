//! `--compare BASELINE CANDIDATE` and `--compare-at TIME`: the same audit
//! on two sides, reported side by side with the differences and their
//! significance (`gatecal_analysis::compare`).

use gatecal_analysis::compare::{compare, side};
use gatecal_analysis::{GateDist, GateDistReport, InputSummary, TimeRange};
use gatecal_cli::output::{Outputs, report_format, table_width};
use gatecal_cli::pipeline::{Analysed, Analysis, InputArgs, analyse, input_files, no_decisions};
use gatecal_parser::{InputFiles, InputSource, InputSpec};

use crate::args::Args;

/// Both sides' audits from one reading of the input: every decision goes
/// to both, each counting those of its own time range.
struct Pair(GateDist, GateDist);

impl Analysis for Pair {
    type Report = (GateDistReport, GateDistReport);
    const READS_VLLM: bool = false;

    fn with_records(self, _sink: gatecal_analysis::RecordSink) -> Self {
        // --emit-decisions is refused with a comparison.
        self
    }

    fn push_decision(&mut self, d: gatecal_analysis::DecisionInput) {
        self.0.push(d.clone());
        self.1.push(d);
    }

    fn finish(self, input: InputSummary) -> Self::Report {
        (self.0.finish(input.clone()), self.1.finish(input))
    }
}

fn is_stdin(a: &str) -> bool {
    InputSpec::parse(a).source == InputSource::Stdin
}

/// The input flags with `inputs` in place of the positional ones.
fn with_inputs(args: &InputArgs, inputs: Vec<String>) -> InputArgs {
    InputArgs {
        inputs,
        ..args.clone()
    }
}

/// A time for people: RFC 3339 UTC, to the second.
fn rfc3339(ts: f64) -> String {
    format!("{}Z", gatecal_render::num::utc(ts).replacen(' ', "T", 1))
}

/// Runs the comparison the flags ask for and writes its report.
pub fn run(args: Args) -> anyhow::Result<()> {
    let refused = args.not_with_compare();
    if !refused.is_empty() {
        anyhow::bail!(
            "{} cannot be used with --compare or --compare-at (a comparison writes one side-by-side report)",
            refused.join(", ")
        );
    }
    let mut filter = args.filter.clone();
    filter.peak_prefill_throughput = args.peak_prefill_throughput;
    let configs = filter.config_set()?;
    let format = report_format(args.format, args.output.as_deref())?;
    let width = table_width(args.output.as_deref(), args.wide);

    let ((a, label_a, ledger_a), (b, label_b, ledger_b), out) =
        match (&args.compare, &args.compare_at) {
            (Some(sides), None) => two_inputs(&args, sides, &configs)?,
            (None, Some(at)) => split(&args, at, &configs)?,
            _ => anyhow::bail!(
                "give --compare BASELINE CANDIDATE, or one input and --compare-at TIME"
            ),
        };
    let report = compare((&a, side(label_a, &a)), (&b, side(label_b, &b)));
    for (which, r) in [("baseline", &a), ("candidate", &b)] {
        if let Some(w) = gatecal_cli::pipeline::pooled_warning(&r.pooled)
            && !args.input.quiet
        {
            eprintln!("gate-dist: warning: {which}: {w}");
        }
    }
    let run = gatecal_cli::output::run_info(args.output.as_deref(), None);
    out.write(|w| gatecal_render::compare::write(format, &report, width, &run, w))?;
    if a.deployments.is_empty() && b.deployments.is_empty() {
        let cause = |l: &gatecal_parser::Ledger| no_decisions("", l).to_string();
        return Err(gatecal_cli::output::NoDecisions(format!(
            "no filter decisions on either side (baseline{}; candidate{})",
            cause(&ledger_a),
            cause(&ledger_b)
        ))
        .into());
    }
    if !args.input.quiet {
        warn(&a, &b);
        for (which, r) in [("baseline", &a), ("candidate", &b)] {
            if r.deployments.is_empty() {
                gatecal_cli::term::eprint(
                    "gate-dist",
                    gatecal_cli::term::Level::Warning,
                    &format!("the {which} holds no filter decision: nothing to compare"),
                );
            }
        }
    }
    gatecal_cli::fail_if::check_gate_dist(&args.fail_if, &b)
}

/// The warnings a report of each side alone prints (a config that
/// disagrees with the log, a replay that does not reproduce it), each
/// naming its side, on stderr.
fn warn(a: &GateDistReport, b: &GateDistReport) {
    use gatecal_render::notes::{Note, collapse};
    use gatecal_render::sections::{config_notes, replay_notes};
    for (which, r) in [("baseline", a), ("candidate", b)] {
        let mut warnings = Vec::new();
        for d in &r.deployments {
            warnings.extend(config_notes(&d.name, &d.config));
            warnings.extend(replay_notes(&d.name, &d.stats));
        }
        warnings.retain(Note::is_warning);
        for w in collapse(&warnings) {
            gatecal_cli::term::eprint(
                "gate-dist",
                gatecal_cli::term::Level::Warning,
                &format!("{which}: {}", w.body()),
            );
        }
    }
}

/// A side's audit, its label, and what its input gave.
type SideReport = (GateDistReport, String, gatecal_parser::Ledger);

/// Both sides, and the report's output (opened before any input is read).
type Sides = (SideReport, SideReport, gatecal_cli::output::Destination);

/// The output, checked against `inputs` and opened before any input is
/// read.
fn open_output(
    args: &Args,
    inputs: &mut InputFiles,
) -> anyhow::Result<gatecal_cli::output::Destination> {
    let config_paths = args.filter.config_paths();
    let others: Vec<(&str, &std::path::Path)> = config_paths
        .iter()
        .map(|p| ("--config", p.as_path()))
        .chain(
            args.candidates
                .candidate_config
                .iter()
                .map(|p| ("--candidate-config", std::path::Path::new(p))),
        )
        .collect();
    let mut outputs = Outputs::new(inputs, &others);
    outputs.open("-o", args.output.as_deref(), inputs)
}

/// `--compare BASELINE CANDIDATE`: each side read and audited in turn.
fn two_inputs(
    args: &Args,
    sides: &[String],
    configs: &gatecal_analysis::ConfigSet,
) -> anyhow::Result<Sides> {
    let [sa, sb] = sides else {
        anyhow::bail!("--compare takes two inputs: BASELINE CANDIDATE");
    };
    if is_stdin(sa) && is_stdin(sb) {
        anyhow::bail!(
            "--compare - -: standard input can be read once, so at most one side is `-`: give the other a file or folder"
        );
    }
    // The output is checked against both sides' files before any is read.
    let mut both = InputFiles::expand(&[InputSpec::parse(sa), InputSpec::parse(sb)])?;
    let out = open_output(args, &mut both)?;
    let mut reports = Vec::new();
    for s in [sa, sb] {
        let input = with_inputs(&args.input, vec![s.clone()]);
        let span = gatecal_cli::pipeline::span_for(
            &input,
            "gate-dist",
            args.since.as_deref(),
            args.until.as_deref(),
        )?;
        let opts = args.options(span)?;
        let files = input_files(&input)?;
        let Analysed { report, inputs, .. } = analyse(
            &input,
            files,
            "gate-dist",
            None,
            None,
            GateDist::new(opts, configs.clone()),
        )?;
        reports.push((report, s.clone(), inputs.ledger));
    }
    let b = reports.pop().expect("two sides");
    let a = reports.pop().expect("two sides");
    Ok((a, b, out))
}

/// `--compare-at TIME`: one input read once, its decisions before TIME
/// the baseline, those from TIME on the candidate.
fn split(args: &Args, at: &str, configs: &gatecal_analysis::ConfigSet) -> anyhow::Result<Sides> {
    let inputs = &args.input.inputs;
    if inputs.len() != 1 {
        anyhow::bail!(
            "--compare-at splits one input (a file, a folder or -), {} given: give one, or compare two with --compare BASELINE CANDIDATE",
            inputs.len()
        );
    }
    let relative = [Some(at), args.since.as_deref(), args.until.as_deref()]
        .into_iter()
        .flatten()
        .any(gatecal_cli::time::is_relative);
    if relative && is_stdin(&inputs[0]) {
        anyhow::bail!(
            "--compare-at {at}: a time from the input's start or end needs the input read twice (once for its times), which standard input cannot be: give a file, or absolute times"
        );
    }
    // Any time relative to the input: read it once for its span.
    let span = if relative {
        gatecal_cli::pipeline::span_for(&args.input, "gate-dist", Some("end"), None)?
    } else {
        None
    };
    let t = gatecal_cli::time::parse_time_in(at, gatecal_cli::time::now(), span)
        .map_err(|e| anyhow::anyhow!("--compare-at: {e}"))?;
    let opts = args.options(span)?;
    let range = opts.time_range;
    let before = TimeRange {
        since: range.since,
        until: Some(range.until.map_or(t, |u| u.min(t))),
    };
    let after = TimeRange {
        since: Some(range.since.map_or(t, |s| s.max(t))),
        until: range.until,
    };
    for r in [before, after] {
        if let (Some(s), Some(u)) = (r.since, r.until)
            && s >= u
        {
            anyhow::bail!(
                "--compare-at {at} ({}) is outside --since/--until: one side would count no time",
                rfc3339(t)
            );
        }
    }
    let mut files = input_files(&args.input)?;
    let out = open_output(args, &mut files)?;
    let side_opts = |r: TimeRange| gatecal_analysis::GateDistOptions {
        time_range: r,
        ..opts.clone()
    };
    let Analysed {
        report: (a, b),
        inputs: read,
        ..
    } = analyse(
        &args.input,
        files,
        "gate-dist",
        None,
        None,
        Pair(
            GateDist::new(side_opts(before), configs.clone()),
            GateDist::new(side_opts(after), configs.clone()),
        ),
    )?;
    let name = &inputs[0];
    let when = rfc3339(t);
    Ok((
        (a, format!("{name}, before {when}"), read.ledger.clone()),
        (b, format!("{name}, from {when}"), read.ledger),
        out,
    ))
}
