//! Reading the inputs: logs or decision records in, decisions and vLLM stats
//! out, with the ledger, `--emit-decisions`, `--strict` and progress.

use std::cell::RefCell;
use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use gatecal_analysis::{
    DecisionInput, DecisionKey, DuplicateCheck, Duplicates, GateDist, GateDistReport, InputSummary,
    Recommend, RecommendReport, RecordSink, TraceSummary,
};
use gatecal_parser::{
    Completion, Decision, DecisionRecord, DecisionWriter, InputFiles, InputFormat, InputSource,
    InputSpec, Item, Ledger, ParseError, ParseOptions, Progress, VllmStats, count_trace_files,
    parse_files,
};
use rustc_hash::FxHashMap;

use crate::deployments::DeploymentIndex;

use crate::output::{Destination, StrictFailure};

mod join;
use join::Join;
pub use join::MAX_HELD_TRACED_DECISIONS;

/// `--input-format`: how to read the inputs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InputFormatArg {
    /// From each input's content.
    #[default]
    Auto,
    /// EPP (and vLLM) logs.
    Logs,
    /// Decision records (JSON lines).
    Decisions,
    /// OpenTelemetry traces (OTLP/JSON, Jaeger, Tempo).
    Traces,
}

/// The input flags both binaries take.
#[derive(clap::Args, Debug, Clone)]
pub struct InputArgs {
    /// Inputs: EPP logs, vLLM logs, decision records or OpenTelemetry traces
    /// (OTLP/JSON, Jaeger or Tempo JSON): files, folders (recursive), globs,
    /// `-` for stdin; `NAME=PATH` names the deployment. Gzip and the format
    /// are detected by content.
    #[arg(required_unless_present_any = ["generate", "kubectl"], value_name = "INPUT")]
    pub inputs: Vec<String>,
    /// Read the pods' logs with `kubectl logs` (run with --prefix
    /// --timestamps --tail=-1 --all-containers and --max-log-requests
    /// sized to the pods): everything after --kubectl is kubectl's, so give
    /// it last, e.g. `--kubectl -n NAMESPACE -l SELECTOR`. One `-l` (or pod
    /// name) per group of pods: the EPP pods, and for `recommend` the vLLM
    /// pods too. The binary's --since becomes kubectl's --since-time.
    #[arg(long, value_name = "KUBECTL ARGS", num_args = 1.., allow_hyphen_values = true)]
    pub kubectl: Option<Vec<String>>,
    /// The kubectl that --kubectl runs.
    #[arg(long, value_name = "PATH", default_value = "kubectl")]
    pub kubectl_bin: std::ffi::OsString,
    /// How to read the inputs.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = InputFormatArg::Auto)]
    pub input_format: InputFormatArg,
    /// Fail (exit 1) on the first malformed line instead of counting it.
    #[arg(long)]
    pub strict: bool,
    /// Also write every decision as JSON lines (the decisions format,
    /// version 2: with its gate as analysed and the config in force) to FILE.
    #[arg(long, value_name = "FILE")]
    pub emit_decisions: Option<PathBuf>,
    /// Year of vLLM log records (their prefix has none); default: from the
    /// kubelet timestamps or other absolute times of the same input.
    #[arg(long, value_name = "YEAR")]
    pub year: Option<i32>,
    /// Most MiB of one trace document (a line of OTLP/JSON, a whole Jaeger
    /// or Tempo response), 1 to 4096: a longer one is skipped, counted
    /// malformed (each is held whole while it is read).
    #[arg(long, value_name = "MIB", default_value_t = (gatecal_parser::DEFAULT_MAX_TRACE_DOCUMENT_BYTES >> 20) as u64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_trace_document_mib: u64,
    /// Threads for reading and parsing, and in recommend for the vLLM
    /// peak estimates and the deployments' engine fits and replays at the
    /// end, 1 to 256 (default: the machine's cores, at most 8).
    #[arg(short = 'j', long, value_name = "N", value_parser = crate::bounds::parse_threads)]
    pub threads: Option<usize>,
    /// No progress on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Colour in the messages on stderr: `auto` (on a terminal, unless
    /// `NO_COLOR` is set), `always`, `never`.
    #[arg(long, value_name = "WHEN", value_enum, default_value = "auto")]
    pub color: crate::term::ColorChoice,
    /// Print a shell completion script or the man page to stdout, and exit.
    ///
    /// Install them, e.g. `gate-dist --generate complete-bash >
    /// ~/.local/share/bash-completion/completions/gate-dist`,
    /// `gate-dist --generate man > ~/.local/share/man/man1/gate-dist.1`.
    #[arg(long, value_name = "KIND", value_enum, hide_short_help = true)]
    pub generate: Option<crate::generate::Generate>,
    /// Print each deployment found (name, decisions, time range, config
    /// source, EPP, endpoint and vLLM pods) instead of the report, and exit.
    #[arg(long)]
    pub list_deployments: bool,
    /// The path the lines on stdin (`-`) were read from, e.g. a shard a
    /// job pipes in: it names stdin in the ledger and messages, gives the
    /// EPP pod of a kubelet log (`/var/log/pods/NS_POD_UID/CONTAINER/N.log`)
    /// as reading the file does, and is the stream a partial report counts
    /// when the lines name no pod.
    #[arg(long, value_name = "PATH")]
    pub source_path: Option<String>,
}

impl InputArgs {
    /// The parser options these flags ask for.
    pub fn parse_options(&self) -> ParseOptions {
        ParseOptions {
            format: match self.input_format {
                InputFormatArg::Auto => InputFormat::Auto,
                InputFormatArg::Logs => InputFormat::Logs,
                InputFormatArg::Decisions => InputFormat::Decisions,
                InputFormatArg::Traces => InputFormat::Traces,
            },
            strict: self.strict,
            year: self.year,
            max_trace_document_bytes: (self.max_trace_document_mib as usize) << 20,
            threads: self.threads.unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get().min(8))
                    .unwrap_or(1)
            }),
            ..ParseOptions::default()
        }
    }
}

/// What the inputs gave: the parser's ledger, and the trace join.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// Every input's line counts.
    pub ledger: Ledger,
    /// The trace inputs and their join with the logs; `None` without any.
    pub traces: Option<TraceSummary>,
    /// Decisions and vLLM stats lines seen twice, counted once.
    pub duplicates: Duplicates,
}

/// The ledger as reported.
pub fn summary(inputs: &Inputs) -> InputSummary {
    let ledger = &inputs.ledger;
    let t = &ledger.total;
    InputSummary {
        inputs: ledger.inputs.iter().map(|i| i.name.clone()).collect(),
        lines_total: t.lines_total,
        lines_used: t.lines_used,
        lines_ignored: t.lines_ignored,
        lines_malformed: t.lines_malformed,
        lines_out_of_range: t.lines_out_of_range,
        bytes: t.bytes,
        decisions_assembled: t.decisions,
        decisions_incomplete: t.decisions_incomplete,
        decisions_evicted: t.decisions_evicted,
        requests_evicted_for_memory: t.requests_evicted_for_memory,
        duplicates: inputs.duplicates,
        prometheus_samples_dropped: 0,
        first_malformed: t.first_malformed.iter().map(|m| m.to_string()).collect(),
        traces: inputs.traces.clone(),
    }
}

pub use gatecal_parser::KUBECTL_SELECTOR_TAIL;

/// The error of an input that held no filter decision (exit 3), with the
/// likely cause read from the ledger, in this order: no line at all; no EPP
/// line (zap JSON or console), only vLLM lines or something else; every pod
/// of a `kubectl logs --prefix` capture holding at most 10 lines (a
/// selector capture without `--tail=-1`); EPP lines without a filter line
/// (the EPP logs below verbosity 4).
pub fn no_decisions(what: &str, ledger: &Ledger) -> anyhow::Error {
    let t = &ledger.total;
    let sh = &t.shapes;
    let epp = sh.zap_json + sh.console;
    let cause = if t.lines_total == 0 {
        format!(
            "the input is empty ({} file(s), 0 lines): the capture failed or wrote nothing",
            ledger.inputs.len()
        )
    } else if sh.decision_record > 0 {
        format!(
            "{} decision record line(s), none readable as a decision: see the malformed lines",
            sh.decision_record
        )
    } else if epp == 0 && sh.trace > 0 {
        match t.first_malformed.first() {
            Some(m) => format!(
                "{} trace line(s), no filter span read; {} malformed, the first at {m}",
                sh.trace, t.lines_malformed
            ),
            None => format!(
                "{} trace line(s) but no filter_prefix_cache_affinity span: does the EPP export the filter's spans?",
                sh.trace
            ),
        }
    } else if epp == 0 && sh.vllm > 0 {
        format!(
            "only vLLM lines ({} of {}), no EPP log line: add the EPP pod's log (kubectl logs -l <epp-selector> --tail=-1)",
            sh.vllm, t.lines_total
        )
    } else if epp == 0 {
        format!(
            "no EPP log line (zap JSON or console encoder) in {} line(s): is this the EPP container's log?",
            t.lines_total
        )
    } else if let Some((pods, most)) = pods_all_short(ledger) {
        format!(
            "every pod holds at most {KUBECTL_SELECTOR_TAIL} lines ({pods} pod(s), {most} line(s) at most): \
             `kubectl logs -l SELECTOR` keeps only the last {KUBECTL_SELECTOR_TAIL} lines of each pod; capture with --tail=-1"
        )
    } else {
        format!(
            "{epp} EPP log line(s) but no prefix-cache-affinity-filter line: the EPP logs at verbosity below 4 \
             (set -v=4, e.g. router.epp.flags in the chart), or the filter is not in its scheduling profile"
        )
    };
    crate::output::NoDecisions(format!("{what}: {cause}")).into()
}

/// The error when `--since`/`--until` selected none of the decisions read
/// (exit 3): how many were read, the input's time range and the filter's,
/// and, for a duration before now, that it counts from now. `None` when no
/// time filter is set or no decision was read (then [`no_decisions`]).
pub fn none_in_range(
    range: &gatecal_analysis::TimeRange,
    since: Option<&str>,
    span: Option<(f64, f64)>,
    ledger: &Ledger,
) -> Option<anyhow::Error> {
    let read = ledger.total.decisions;
    if read == 0 || (range.since.is_none() && range.until.is_none()) {
        return None;
    }
    let utc = gatecal_render::num::utc;
    let input = match span {
        Some((a, b)) => format!(
            "the input's decisions run from {} to {} UTC",
            utc(a),
            utc(b)
        ),
        None => "no decision read has a time".to_string(),
    };
    let filter = match (range.since, range.until) {
        (Some(a), Some(b)) => format!("the filter counts from {} to before {} UTC", utc(a), utc(b)),
        (Some(a), None) => format!("the filter counts from {} UTC on", utc(a)),
        (None, Some(b)) => format!("the filter counts before {} UTC", utc(b)),
        (None, None) => unreachable!("checked above"),
    };
    let hint = match since {
        Some(s) if crate::time::parse_compound(s).is_some() => format!(
            "; --since {s} counts back from now: for an older capture, count from its end (--since end-{s})"
        ),
        _ => String::new(),
    };
    Some(
        crate::output::NoDecisions(format!(
            "--since/--until select none of the {read} decision(s) read: {input}; {filter}{hint}"
        ))
        .into(),
    )
}

/// When every `[pod/NAME/CONTAINER] ` prefix of the inputs belongs to a
/// pod with at most [`KUBECTL_SELECTOR_TAIL`] lines: the number of pods and
/// the most lines of one, as counted while the inputs were read
/// ([`gatecal_parser::PodLines`]). `None` when no line has a prefix, or a
/// pod has more.
fn pods_all_short(ledger: &Ledger) -> Option<(usize, u64)> {
    ledger.total.pod_lines.all_short()
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

/// `--emit-decisions`: the file the analysis writes its decision records
/// to, opened before any input is read ([`crate::output::Outputs::open`]).
pub struct Emitter {
    path: PathBuf,
    state: Rc<RefCell<EmitState>>,
}

struct EmitState {
    w: DecisionWriter<crate::output::Writer>,
    err: Option<io::Error>,
}

impl Emitter {
    /// The emitter of `--emit-decisions` (`dest`, opened as that flag's
    /// output), if asked.
    pub fn open(args: &InputArgs, dest: Option<Destination>) -> anyhow::Result<Option<Emitter>> {
        let (Some(p), Some(dest)) = (&args.emit_decisions, dest) else {
            return Ok(None);
        };
        Ok(Some(Emitter {
            path: p.clone(),
            state: Rc::new(RefCell::new(EmitState {
                w: DecisionWriter::new(dest.into_writer()),
                err: None,
            })),
        }))
    }

    /// The sink to give the analysis: writes each record, keeping the
    /// first error for [`Emitter::finish`].
    pub fn sink(&self) -> RecordSink {
        let state = self.state.clone();
        Box::new(move |r: DecisionRecord| {
            let mut st = state.borrow_mut();
            if st.err.is_none()
                && let Err(e) = st.w.write_record(&r)
            {
                st.err = Some(e);
            }
        })
    }

    /// Flushes the file; the first write error, if any, names it.
    /// Call after the analysis finished (it holds the sink until then).
    pub fn finish(self) -> anyhow::Result<u64> {
        let path = self.path;
        let state = Rc::try_unwrap(self.state)
            .map_err(|_| anyhow::anyhow!("{}: records still being written", path.display()))?
            .into_inner();
        // A reader that closed the pipe (`--emit-decisions - | head`) wants
        // no more records: not an error, and the report is still written.
        let closed = |e: &io::Error| {
            e.kind() == io::ErrorKind::BrokenPipe
                || e.get_ref()
                    .and_then(|inner| inner.downcast_ref::<serde_json::Error>())
                    .and_then(|j| j.io_error_kind())
                    == Some(io::ErrorKind::BrokenPipe)
        };
        if let Some(e) = state.err {
            if closed(&e) {
                return Ok(state.w.written());
            }
            return Err(anyhow::Error::from(e).context(format!("cannot write {}", path.display())));
        }
        let n = state.w.written();
        match state.w.into_inner().and_then(crate::output::Writer::finish) {
            Err(e) if !closed(&e) => {
                Err(anyhow::Error::from(e).context(format!("cannot write {}", path.display())))
            }
            _ => Ok(n),
        }
    }
}

/// The analysis' input of a decision, with its record when records are
/// written (`emit`).
pub fn decision_input(d: Decision, emit: bool) -> DecisionInput {
    let record = emit.then(|| Box::new(DecisionRecord::from(&d)));
    let mut input = DecisionInput::from(d);
    input.record = record;
    input
}

/// An analysis the inputs feed: the audit of `gate-dist`
/// ([`GateDist`]) or the calibration of `recommend` ([`Recommend`]). It
/// reorders the decisions it is given within its window
/// ([`gatecal_analysis::Reorder`]) and reconstructs each one's gate input
/// ([`gatecal_analysis::Reconstructor`]).
pub trait Analysis: Sized {
    /// What [`Analysis::finish`] returns.
    type Report;
    /// Whether it reads vLLM stats lines (and `--list-deployments` lists
    /// the deployments they name).
    const READS_VLLM: bool;
    /// Hands every decision record to `sink` (`--emit-decisions`).
    fn with_records(self, sink: RecordSink) -> Self;
    /// Adds one decision, in log order.
    fn push_decision(&mut self, d: DecisionInput);
    /// Adds one decision given in the order its reorder buffer would
    /// release it ([`gatecal_analysis::release_order`] over
    /// [`Analysis::reorder_window_s`]), handled without the buffer.
    fn push_in_order(&mut self, d: DecisionInput) {
        self.push_decision(d);
    }
    /// The window of its reorder buffer, seconds of log time, when it
    /// takes decisions in that order ([`Analysis::push_in_order`]).
    fn reorder_window_s(&self) -> Option<f64> {
        None
    }
    /// Adds one vLLM stats line (called only when [`Analysis::READS_VLLM`]).
    fn push_vllm(&mut self, _s: &VllmStats) {}
    /// The report, given the inputs' ledger.
    fn finish(self, input: InputSummary) -> Self::Report;
}

impl Analysis for GateDist {
    type Report = GateDistReport;
    const READS_VLLM: bool = false;
    fn with_records(self, sink: RecordSink) -> Self {
        GateDist::with_records(self, sink)
    }
    fn push_decision(&mut self, d: DecisionInput) {
        self.push(d);
    }
    fn push_in_order(&mut self, d: DecisionInput) {
        GateDist::push_in_order(self, d);
    }
    fn reorder_window_s(&self) -> Option<f64> {
        Some(GateDist::reorder_window_s(self))
    }
    fn finish(self, input: InputSummary) -> GateDistReport {
        GateDist::finish(self, input)
    }
}

impl Analysis for Recommend {
    type Report = RecommendReport;
    const READS_VLLM: bool = true;
    fn with_records(self, sink: RecordSink) -> Self {
        Recommend::with_records(self, sink)
    }
    fn push_decision(&mut self, d: DecisionInput) {
        Recommend::push_decision(self, d);
    }
    fn push_in_order(&mut self, d: DecisionInput) {
        Recommend::push_in_order(self, d);
    }
    fn reorder_window_s(&self) -> Option<f64> {
        Some(Recommend::reorder_window_s(self))
    }
    fn push_vllm(&mut self, s: &VllmStats) {
        Recommend::push_vllm(self, s);
    }
    fn finish(self, input: InputSummary) -> RecommendReport {
        Recommend::finish(self, input)
    }
}

/// What [`analyse`] gives back.
pub struct Analysed<R> {
    /// The analysis' report.
    pub report: R,
    /// What the inputs gave.
    pub inputs: Inputs,
    /// The deployments seen (filled only with `--list-deployments`).
    pub index: DeploymentIndex,
}

/// The stage both binaries run: reads every input ([`read_inputs`]),
/// feeds its decisions (those `--window` admits, with their records when
/// `emitter` writes them) and, when the analysis reads them, its vLLM stats
/// lines to `analysis`, indexes the deployments for `--list-deployments`,
/// finishes the analysis and then the emitter.
pub fn analyse<A: Analysis>(
    args: &InputArgs,
    files: InputFiles,
    bin: &str,
    window_s: Option<f64>,
    emitter: Option<Emitter>,
    mut analysis: A,
) -> anyhow::Result<Analysed<A::Report>> {
    if let Some(e) = &emitter {
        analysis = analysis.with_records(e.sink());
    }
    let emit = emitter.is_some();
    let list = args.list_deployments;
    let mut windows = crate::bounds::WindowBound::new(window_s);
    // Both callbacks reach the analysis and the index.
    let state = RefCell::new((analysis, DeploymentIndex::default()));
    let inputs = read_inputs(
        args,
        files,
        bin,
        |d| {
            let (analysis, index) = &mut *state.borrow_mut();
            index.decision_time(d.ts);
            if list {
                index.decision(&d);
            }
            if windows.admit(d.ts) {
                analysis.push_decision(decision_input(d, emit));
            }
        },
        |s| {
            if A::READS_VLLM {
                let (analysis, index) = &mut *state.borrow_mut();
                if list {
                    index.vllm(s);
                }
                analysis.push_vllm(s);
            }
        },
    )?;
    windows.finish()?;
    let (analysis, index) = state.into_inner();
    let report = analysis.finish(summary(&inputs));
    if let Some(e) = emitter {
        e.finish()?;
    }
    Ok(Analysed {
        report,
        inputs,
        index,
    })
}

/// The first and last decision times of the inputs when `--since` or
/// `--until` counts from them (`end-1h`, `start+10m`): the inputs are then
/// read once for these times, before the analysis reads them again.
/// `None` when neither flag does. Standard input cannot be read twice: an
/// error says so.
pub fn span_for(
    args: &InputArgs,
    bin: &str,
    since: Option<&str>,
    until: Option<&str>,
) -> anyhow::Result<Option<crate::time::Span>> {
    let flags: Vec<&str> = [("--since", since), ("--until", until)]
        .into_iter()
        .filter(|(_, v)| v.is_some_and(crate::time::is_relative))
        .map(|(f, _)| f)
        .collect();
    if flags.is_empty() {
        return Ok(None);
    }
    if args
        .inputs
        .iter()
        .any(|a| InputSpec::parse(a).source == InputSource::Stdin)
    {
        anyhow::bail!(
            "{}: a time from the input's start or end needs the input read twice (once for \
             its times), which standard input cannot be: give a file, or an absolute time",
            flags.join(" and ")
        );
    }
    let quiet = InputArgs {
        quiet: true,
        list_deployments: false,
        emit_decisions: None,
        ..args.clone()
    };
    let mut span: Option<crate::time::Span> = None;
    read_inputs(
        &quiet,
        input_files(&quiet)?,
        bin,
        |d| {
            if let Some(t) = d.ts.filter(|t| t.is_finite()) {
                span = Some(span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
            }
        },
        |_| {},
    )?;
    Ok(span)
}

/// The input files the flags name, folders and globs expanded (no file is
/// read yet): open the outputs against them
/// ([`crate::output::Outputs`]), then [`read_inputs`].
pub fn input_files(args: &InputArgs) -> anyhow::Result<InputFiles> {
    input_files_since(args, None)
}

/// [`input_files`], and with `--kubectl` the `kubectl logs` streams
/// ([`crate::kubectl`]), from the binary's `--since` (`since`, as given)
/// when kubectl's arguments give no start.
pub fn input_files_since(args: &InputArgs, since: Option<&str>) -> anyhow::Result<InputFiles> {
    let mut specs: Vec<InputSpec> = args.inputs.iter().map(|a| InputSpec::parse(a)).collect();
    // `--source-path`: stdin read as a stream named by the path, after the
    // files.
    let stdin = match &args.source_path {
        Some(path) => {
            let i = specs
                .iter()
                .position(|s| s.source == gatecal_parser::InputSource::Stdin)
                .ok_or_else(|| {
                    anyhow::anyhow!("--source-path {path}: names standard input, which is not read (give - as an input)")
                })?;
            anyhow::ensure!(
                !path.is_empty(),
                "--source-path: give the path stdin's lines come from"
            );
            Some((path.clone(), specs.remove(i).name))
        }
        None => None,
    };
    let mut files = InputFiles::expand(&specs)?;
    if let Some((path, name)) = stdin {
        files.push_stream(
            path,
            name,
            Box::new(std::io::stdin()),
            &args.parse_options(),
        );
    }
    if let Some(k) = &args.kubectl {
        let since = since
            .map(|s| crate::time::parse_time(s, crate::time::now()))
            .transpose()
            .map_err(|e| anyhow::anyhow!("--since: {e}"))?;
        crate::kubectl::add_streams(
            &mut files,
            &args.kubectl_bin,
            k,
            since,
            &args.parse_options(),
            args.quiet,
        )?;
    }
    Ok(files)
}

/// Most skipped files listed one by one on stderr (the rest are counted).
const SKIPPED_LISTED: usize = 20;

/// Reads every input file, calling `on_decision` (with each decision, by
/// value) and `on_vllm` in log order. A decision seen before (the same
/// deployment, request id, profile, filter instance and time) or a vLLM
/// stats line seen before (the same deployment, pod, engine, time and
/// values; [`gatecal_analysis::DuplicateCheck`]) is dropped and counted, with a
/// warning on stderr. Files not read (see [`gatecal_parser::Ledger::skipped`]) are
/// listed on stderr, prefixed with `bin`.
pub fn read_inputs(
    args: &InputArgs,
    mut files: InputFiles,
    bin: &str,
    mut on_decision: impl FnMut(Decision),
    mut on_vllm: impl FnMut(&VllmStats),
) -> anyhow::Result<Inputs> {
    if !args.quiet
        && std::io::stdin().is_terminal()
        && args
            .inputs
            .iter()
            .any(|a| InputSpec::parse(a).source == InputSource::Stdin)
    {
        crate::term::eprint(
            bin,
            crate::term::Level::Note,
            &format!(
                "reading logs from stdin, which is this terminal: pipe a log in \
                 (kubectl logs ... | {bin} -) or end with Ctrl-D"
            ),
        );
    }
    let mut opts = args.parse_options();
    let (trace_inputs, other_inputs) = count_trace_files(&mut files, &opts);
    let mut join = Join {
        hold: trace_inputs > 0 && other_inputs > 0,
        held: Vec::new(),
        not_held: 0,
        keys: FxHashMap::default(),
        traced: 0,
        joined: 0,
        log_decisions: 0,
    };
    let decisions = Arc::new(AtomicU64::new(0));
    let display = (!args.quiet && std::io::stderr().is_terminal()).then(|| {
        let p = Progress::new();
        opts.progress = Some(p.clone());
        crate::progress::Display::start(p, decisions.clone())
    });
    let mut seen = DuplicateCheck::default();
    let result = parse_files(files, &opts, |item| match item {
        Item::Decision(d) => {
            decisions.fetch_add(1, Ordering::Relaxed);
            if !seen.admit(&DecisionKey {
                deployment: &d.deployment,
                request_id: d.request_id.as_deref(),
                profile: d.profile.as_deref(),
                filter: d.filter.as_deref(),
                ts: d.ts,
                traced: d.completion == Completion::Traced,
            }) {
                return;
            }
            if let Some(d) = join.push(d) {
                on_decision(*d);
            }
        }
        Item::VllmStats(s) => {
            if seen.admit_vllm(&s) {
                on_vllm(&s);
            }
        }
    });
    for d in join.finish() {
        on_decision(d);
    }
    if let Some(d) = display {
        d.finish();
    }
    let ledger = match result {
        Ok(l) => l,
        Err(ParseError::Malformed(m)) => {
            return Err(StrictFailure(format!("malformed line at {m} (--strict)")).into());
        }
        Err(e) => return Err(anyhow::Error::from(e)),
    };
    report_skipped(bin, &ledger);
    if !args.quiet
        && let Some(w) = v0_hit_rate_note(&ledger)
    {
        crate::term::eprint(bin, crate::term::Level::Warning, &w);
    }
    let duplicates = seen.found();
    if !args.quiet
        && let Some(w) = gatecal_render::sections::duplicates_note(&duplicates)
    {
        crate::term::eprint(bin, crate::term::Level::Warning, &w);
    }
    let traces = (trace_inputs > 0 || join.traced > 0).then(|| join.summary(&ledger));
    Ok(Inputs {
        ledger,
        traces,
        duplicates,
    })
}

/// The note on vLLM V0's `Prefix cache hit rate: GPU: x%, CPU: y%` lines,
/// when the inputs hold any: seen, and not applied.
pub fn v0_hit_rate_note(ledger: &Ledger) -> Option<String> {
    let n = ledger.total.shapes.vllm_v0_hit_rate;
    (n > 0).then(|| {
        format!(
            "{n} vLLM V0 line(s) `Prefix cache hit rate: GPU: x%, CPU: y%` seen and not applied: \
             V0's prompt throughput is read as logged, without a hit-rate correction; where it \
             counts prompt tokens served from cache, a peak from V0 stats lines is high by their share"
        )
    })
}

/// Lists the files not read on stderr: the first [`SKIPPED_LISTED`], then
/// how many more.
fn report_skipped(bin: &str, ledger: &Ledger) {
    let n = ledger.skipped.len();
    if n == 0 {
        return;
    }
    crate::term::eprint(
        bin,
        crate::term::Level::Warning,
        &format!("{n} file(s) not read:"),
    );
    for s in ledger.skipped.iter().take(SKIPPED_LISTED) {
        // File names may hold anything: no control reaches the terminal.
        eprintln!("  {}", gatecal_render::escape::terminal(&s.to_string()));
    }
    if n > SKIPPED_LISTED {
        eprintln!("  … and {} more", n - SKIPPED_LISTED);
    }
}

/// The warning when deployments past the cap were pooled, if any were.
pub fn pooled_warning(p: &gatecal_analysis::Pooled) -> Option<String> {
    (p.decisions > 0).then(|| {
        format!(
            "more than {} deployments: {}{} more ({} decisions) pooled into {:?}",
            p.max_deployments,
            if p.at_least { "at least " } else { "" },
            p.deployments,
            p.decisions,
            gatecal_analysis::OTHER_DEPLOYMENT
        )
    })
}

/// Takes the Prometheus `query_range` responses out of the inputs (found by
/// content, under any name, gzip or not: their first 4 KiB) and reads
/// them, streamed: `(file, series)`. A file that starts like one but does
/// not parse is an error naming it, and so is the file that takes the
/// responses past `max_bytes` (all files together, decompressed). A stream
/// (stdin, a pipe) is read once, on from the start looked at.
pub fn take_prometheus(
    files: &mut InputFiles,
    args: &InputArgs,
    max_bytes: u64,
) -> anyhow::Result<Vec<(String, Vec<gatecal_analysis::PromSeries>)>> {
    let taken = files.take_files(
        &args.parse_options(),
        gatecal_analysis::looks_like_query_range,
    );
    let mut out = Vec::with_capacity(taken.len());
    let mut left = max_bytes;
    for file in taken {
        let display = file.display.clone();
        let err = |e: String| anyhow::anyhow!("{display}: {e}");
        let r = file.reader().map_err(|e| err(e.to_string()))?;
        let (series, read) = gatecal_analysis::read_query_range(r, left, max_bytes).map_err(err)?;
        left = left.saturating_sub(read);
        out.push((display, series));
    }
    Ok(out)
}

#[cfg(test)]
mod input_format_tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        inputs: InputArgs,
    }

    fn format_of(args: &[&str]) -> Result<InputFormat, String> {
        Cli::try_parse_from(args)
            .map(|c| c.inputs.parse_options().format)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn input_format_is_one_of_four_named_values() {
        assert_eq!(format_of(&["x", "in.log"]), Ok(InputFormat::Auto));
        for (name, f) in [
            ("auto", InputFormat::Auto),
            ("logs", InputFormat::Logs),
            ("decisions", InputFormat::Decisions),
            ("traces", InputFormat::Traces),
        ] {
            assert_eq!(format_of(&["x", "--input-format", name, "in"]), Ok(f));
        }
        let e = format_of(&["x", "--input-format", "otlp", "in"]).unwrap_err();
        assert!(
            e.contains("invalid value 'otlp' for '--input-format <FORMAT>'"),
            "{e}"
        );
        assert!(
            e.contains("[possible values: auto, logs, decisions, traces]"),
            "{e}"
        );
    }
}
