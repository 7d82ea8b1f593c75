//! Reading the inputs: logs or decision records in, decisions and vLLM stats
//! out, with the ledger, `--emit-decisions`, `--strict` and progress.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use gatecal_analysis::gate_dist::InputSummary;
use gatecal_parser::{
    Decision, DecisionWriter, InputFormat, InputSpec, Item, Ledger, ParseError, ParseOptions,
    VllmStats, parse_inputs,
};

use crate::output::StrictFailure;

/// The input flags both binaries take.
#[derive(clap::Args, Debug, Clone)]
pub struct InputArgs {
    /// Inputs: EPP logs, vLLM logs or decision records: files, folders
    /// (recursive), globs, `-` for stdin; `NAME=PATH` names the deployment.
    /// Gzip is detected by content.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<String>,
    /// `logs`, `decisions` (JSON lines), or `auto` (from each input's first line).
    #[arg(long, value_name = "FORMAT", default_value = "auto",
          value_parser = ["auto", "logs", "decisions"])]
    pub input_format: String,
    /// Fail (exit 1) on the first malformed line instead of counting it.
    #[arg(long)]
    pub strict: bool,
    /// Also write every decision as JSON lines (the decisions format) to FILE.
    #[arg(long, value_name = "FILE")]
    pub emit_decisions: Option<PathBuf>,
    /// Year of vLLM log records (their prefix has none); default: from the
    /// kubelet timestamps or other absolute times of the same input.
    #[arg(long, value_name = "YEAR")]
    pub year: Option<i32>,
    /// Threads for reading and parsing (default: the machine's cores, at most 8).
    #[arg(short = 'j', long, value_name = "N")]
    pub threads: Option<usize>,
    /// No progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

impl InputArgs {
    /// The parser options these flags ask for.
    pub fn parse_options(&self) -> ParseOptions {
        ParseOptions {
            format: match self.input_format.as_str() {
                "logs" => InputFormat::Logs,
                "decisions" => InputFormat::Decisions,
                _ => InputFormat::Auto,
            },
            strict: self.strict,
            year: self.year,
            threads: self.threads.unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get().min(8))
                    .unwrap_or(1)
            }),
            ..ParseOptions::default()
        }
    }
}

/// The ledger as reported.
pub fn summary(ledger: &Ledger) -> InputSummary {
    let t = &ledger.total;
    InputSummary {
        inputs: ledger.inputs.iter().map(|i| i.name.clone()).collect(),
        lines_total: t.lines_total,
        lines_used: t.lines_used,
        lines_ignored: t.lines_ignored,
        lines_malformed: t.lines_malformed,
        bytes: t.bytes,
        decisions_assembled: t.decisions,
        decisions_incomplete: t.decisions_incomplete,
        decisions_evicted: t.decisions_evicted,
        first_malformed: t.first_malformed.iter().map(|m| m.to_string()).collect(),
    }
}

/// Tells the user on stderr (unless `--quiet`) that nothing usable was found.
pub fn note_empty(args: &InputArgs, what: &str, input: &InputSummary) {
    if !args.quiet {
        eprintln!(
            "{what} in {} line(s) ({} ignored, {} malformed): are these EPP logs at -v=4?",
            input.lines_total, input.lines_ignored, input.lines_malformed
        );
    }
}

/// Parses the command line of a binary: `--help` and `--version` print and
/// exit 0, usage errors print and exit 2.
pub fn parse_args<A: clap::Parser>() -> Result<A, std::process::ExitCode> {
    A::try_parse().map_err(|e| {
        let code = if e.use_stderr() { 2 } else { 0 };
        let _ = e.print();
        std::process::ExitCode::from(code)
    })
}

/// Reads every input, calling `on_decision` (with each decision, by
/// value) and `on_vllm` in log order.
pub fn read_inputs(
    args: &InputArgs,
    mut on_decision: impl FnMut(Decision),
    mut on_vllm: impl FnMut(&VllmStats),
) -> anyhow::Result<Ledger> {
    let specs: Vec<InputSpec> = args.inputs.iter().map(|a| InputSpec::parse(a)).collect();
    let opts = args.parse_options();
    let mut writer = match &args.emit_decisions {
        Some(p) => Some((
            DecisionWriter::new(BufWriter::new(
                File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
            )),
            p.clone(),
        )),
        None => None,
    };
    let progress = !args.quiet && std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut last = start;
    let (mut decisions, mut stats) = (0u64, 0u64);
    let mut write_err: Option<anyhow::Error> = None;
    let result = parse_inputs(&specs, &opts, |item| {
        match item {
            Item::Decision(d) => {
                decisions += 1;
                if let Some((w, p)) = writer.as_mut()
                    && write_err.is_none()
                    && let Err(e) = w.write(&d)
                {
                    write_err = Some(
                        anyhow::Error::from(e).context(format!("cannot write {}", p.display())),
                    );
                }
                on_decision(*d);
            }
            Item::VllmStats(s) => {
                stats += 1;
                on_vllm(&s);
            }
        }
        if progress && (decisions + stats).is_multiple_of(4096) {
            let now = Instant::now();
            if now - last > Duration::from_millis(500) {
                last = now;
                eprint!(
                    "\r{decisions} decisions, {stats} vLLM stats lines, {:.0} s",
                    (now - start).as_secs_f64()
                );
            }
        }
    });
    if progress && last != start {
        eprintln!();
    }
    let ledger = match result {
        Ok(l) => l,
        Err(ParseError::Malformed(m)) => {
            return Err(StrictFailure(format!("malformed line at {m} (--strict)")).into());
        }
        Err(e) => return Err(anyhow::Error::from(e)),
    };
    if let Some(e) = write_err {
        return Err(e);
    }
    if let Some((w, p)) = writer {
        w.into_inner()
            .and_then(|mut b| b.flush())
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(ledger)
}
