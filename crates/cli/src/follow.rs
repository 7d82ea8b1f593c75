//! `--follow`: the inputs read as they grow, and a report every
//! `--every` over the last `--window` of log time.
//!
//! Each input is read on a thread of its own ([`start`]): a file from its
//! start and then as it grows (after a truncation from its start again; a
//! file renamed away and replaced by a new one of the same name is read to
//! its end, then the new one from its start), stdin until it closes; a file
//! created later in a folder given is read from its start. The
//! decisions they give are kept in a [`Window`]: the decision records
//! ([`gatecal_parser::DecisionRecord`], the `--emit-decisions` format)
//! as gzip blocks, dropped once the whole block is older than the window.
//! Memory is bounded by the window's decisions, whatever the run's length.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gatecal_parser::{DecisionRecord, Item, Ledger, ParseError};

mod inputs;
mod vllm;
mod window;

pub use inputs::{Inputs, Msg, Tail, start};
pub use vllm::VllmWindow;
pub use window::Window;

/// What [`run`] tells the binary at each report.
#[derive(Clone, Debug)]
pub struct TickInfo {
    /// Lines read so far, all inputs.
    pub lines: u64,
    /// Bytes read so far (as read: compressed for gzip).
    pub bytes: u64,
    /// The last report: the inputs ended, or SIGINT or SIGTERM came.
    pub last: bool,
    /// The ledger of the inputs that ended.
    pub ledger: Ledger,
    /// Every input read so far, in the order started.
    pub names: Vec<String>,
}

/// Hands every decision (and vLLM stats line) of `inputs` to `on_item` and calls `report`
/// every `every_s` seconds (the first after `every_s`), and once more at
/// the end: when every input ended, or on SIGINT or SIGTERM (then the
/// run ends with the last report, and exit 0). An input that fails is a
/// warning on stderr, and the others are read on.
pub fn run(
    bin: &str,
    inputs: Inputs,
    every_s: f64,
    mut on_item: impl FnMut(Item),
    mut report: impl FnMut(TickInfo) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    crate::atomic::defer_interrupts();
    let every = Duration::from_secs_f64(every_s);
    let mut ledger = Ledger::default();
    let mut open = inputs.names.len();
    let mut names = inputs.names.clone();
    let mut next = Instant::now() + every;
    let info = |ledger: &Ledger, names: &[String], last: bool| TickInfo {
        lines: inputs.lines.load(Ordering::Relaxed),
        bytes: inputs.bytes.load(Ordering::Relaxed),
        last,
        ledger: ledger.clone(),
        names: names.to_vec(),
    };
    loop {
        if Instant::now() >= next {
            report(info(&ledger, &names, false))?;
            next += every;
            if next <= Instant::now() {
                next = Instant::now() + every;
            }
        }
        if crate::atomic::interrupted() {
            // The files read to their ends, and what their readers still
            // held (requests not yet closed) handed on, for a second at
            // most (stdin may not close).
            inputs.stop.store(true, Ordering::Relaxed);
            let until = Instant::now() + Duration::from_secs(1);
            while open > 0 {
                let wait = until.saturating_duration_since(Instant::now());
                match inputs.rx.recv_timeout(wait) {
                    Ok(Msg::Item(item)) => on_item(item),
                    Ok(Msg::Ended(name, r)) => {
                        open -= 1;
                        ended(bin, &mut ledger, name, *r);
                    }
                    Ok(Msg::Started(name)) => {
                        open += 1;
                        names.push(name);
                    }
                    Err(_) => break,
                }
            }
            return report(info(&ledger, &names, true));
        }
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(100));
        match inputs.rx.recv_timeout(wait) {
            Ok(Msg::Item(item)) => on_item(item),
            Ok(Msg::Ended(name, r)) => {
                open -= 1;
                ended(bin, &mut ledger, name, *r);
                if open == 0 {
                    return report(info(&ledger, &names, true));
                }
            }
            Ok(Msg::Started(name)) => {
                open += 1;
                names.push(name);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return report(info(&ledger, &names, true));
            }
        }
    }
}

/// An input ended: its ledger joins `ledger`, or its error is a warning.
fn ended(bin: &str, ledger: &mut Ledger, name: String, r: Result<Ledger, ParseError>) {
    match r {
        Ok(l) => {
            for i in l.inputs {
                ledger.push(i, 8);
            }
        }
        Err(e) => crate::term::eprint(
            bin,
            crate::term::Level::Warning,
            &format!("{name}: no longer read: {e}"),
        ),
    }
}

/// What a report is made from: the window's decisions and vLLM stats
/// lines.
pub struct Windows {
    /// The decision records.
    pub decisions: Window,
    /// The vLLM stats lines (only when the analysis reads them).
    pub vllm: VllmWindow,
}

impl Windows {
    /// The latest time read, decisions and vLLM stats lines together.
    pub fn latest(&self) -> Option<f64> {
        match (self.decisions.latest(), self.vllm.latest()) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Follows `inputs` for `A`'s report: every decision goes through `live`,
/// an analysis run for the whole run, which gives each decision's record
/// with its gate as analysed and the config in force (and hands it to
/// `on_record` too); the records of the last `window_s` seconds are kept,
/// and so are the vLLM stats lines when `A` reads them. `report` is called
/// every `every_s` seconds and at the end, as [`run`] says, with the
/// windows; [`audit`] gives the report over them.
pub fn follow<A: crate::pipeline::Analysis>(
    bin: &str,
    inputs: Inputs,
    every_s: f64,
    window_s: f64,
    live: A,
    mut on_record: impl FnMut(&DecisionRecord) + 'static,
    mut report: impl FnMut(&TickInfo, &Windows) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let windows = std::rc::Rc::new(std::cell::RefCell::new(Windows {
        decisions: Window::new(window_s),
        vllm: VllmWindow::new(window_s),
    }));
    let sink = windows.clone();
    let live = std::cell::RefCell::new(Some(live.with_records(Box::new(move |r| {
        on_record(&r);
        sink.borrow_mut().decisions.push(r);
    }))));
    run(
        bin,
        inputs,
        every_s,
        |item| match item {
            Item::Decision(d) => {
                if let Some(a) = live.borrow_mut().as_mut() {
                    a.push_decision(crate::pipeline::decision_input(*d, true));
                }
            }
            Item::VllmStats(s) => {
                if A::READS_VLLM {
                    let w = &mut *windows.borrow_mut();
                    let fallback = w.decisions.latest();
                    w.vllm.push(*s, fallback);
                }
            }
        },
        |info| {
            if info.last
                && let Some(a) = live.borrow_mut().take()
            {
                // Its decisions still held (reordered, or waiting for the
                // bar in force) reach the window.
                a.finish(gatecal_analysis::InputSummary::default());
            }
            report(&info, &windows.borrow())
        },
    )
}

/// The report over the windows: `fresh` (a new analysis, without records)
/// given the window's decisions and vLLM stats lines, and the inputs'
/// ledger so far, with every input read.
pub fn audit<A: crate::pipeline::Analysis>(
    mut fresh: A,
    windows: &Windows,
    info: &TickInfo,
) -> A::Report {
    // In the order the analysis' reorder buffer would give them, handed
    // on one by one: its buffer would hold its window of them decoded.
    match fresh.reorder_window_s() {
        Some(w) => windows.decisions.for_each_released(w, "window", |d| {
            fresh.push_in_order(crate::pipeline::decision_input(d, false))
        }),
        None => windows.decisions.for_each("window", |d| {
            fresh.push_decision(crate::pipeline::decision_input(d, false))
        }),
    }
    if A::READS_VLLM {
        for s in windows.vllm.lines() {
            fresh.push_vllm(&s);
        }
    }
    let mut input = crate::pipeline::summary(&crate::pipeline::Inputs {
        ledger: info.ledger.clone(),
        ..crate::pipeline::Inputs::default()
    });
    input.inputs = info.names.clone();
    input.lines_total = input.lines_total.max(info.lines);
    input.bytes = input.bytes.max(info.bytes);
    input.decisions_assembled = input.decisions_assembled.max(windows.decisions.read());
    fresh.finish(input)
}

/// Writes one rendered report (`text`): JSON on one line, with the
/// window it covers (`follow`); else a header naming `bin` and the span,
/// and the table, the screen cleared first when `redraw`.
pub fn write_report(
    out: &mut dyn Write,
    bin: &str,
    text: &[u8],
    info: &TickInfo,
    windows: &Windows,
    json: bool,
    redraw: bool,
) -> anyhow::Result<()> {
    let window = &windows.decisions;
    let window_s = window.window_s;
    let latest = windows.latest();
    if json {
        out.write_all(&json_line(text, windows, info.last)?)?;
        return Ok(());
    }
    if redraw {
        // Home, clear the screen.
        out.write_all(b"\x1b[H\x1b[2J")?;
    }
    let span = match latest {
        Some(b) => format!(
            "{} to {} UTC",
            gatecal_render::num::utc(b - window_s),
            gatecal_render::num::utc(b)
        ),
        None => "no decision read yet".into(),
    };
    let vllm = if windows.vllm.read() > 0 {
        format!(
            ", {} vLLM stats line(s)",
            gatecal_render::num::group(windows.vllm.read() as i64)
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "{bin} --follow: the last {} of log time ({span}); {} decision(s){vllm} read in all{}\n",
        span_text(window_s),
        gatecal_render::num::group(window.read() as i64),
        if info.last { "; last report" } else { "" }
    )?;
    out.write_all(text)?;
    if !redraw {
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// A rendered JSON report as one line, with the window it covers added
/// as `follow` (docs/json-schema.md).
pub fn json_line(report: &[u8], windows: &Windows, last: bool) -> anyhow::Result<Vec<u8>> {
    let window_s = windows.decisions.window_s;
    let mut v: serde_json::Value = serde_json::from_slice(report)?;
    if let Some(o) = v.as_object_mut() {
        let mut f = serde_json::json!({
            "window_s": window_s,
            "window_start": windows.latest().map(|l| l - window_s),
            "window_end": windows.latest(),
            "decisions_read": windows.decisions.read(),
            "last": last,
        });
        if windows.vllm.read() > 0 {
            f["vllm_lines_read"] = windows.vllm.read().into();
        }
        o.insert("follow".into(), f);
    }
    let mut out = serde_json::to_vec(&v)?;
    out.push(b'\n');
    Ok(out)
}

/// A span of seconds for people: `15m`, `1h`, `90s`.
pub fn span_text(s: f64) -> String {
    if s >= 3600.0 && (s / 3600.0).fract() == 0.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 60.0 && (s / 60.0).fract() == 0.0 {
        format!("{}m", s / 60.0)
    } else {
        format!("{s}s")
    }
}
