//! `gate-dist plan`: the shards a set of inputs is cut into for a run
//! spread over many machines (docs/scale-out.md).

use std::collections::BTreeSet;

use clap::Parser;
use gatecal_cli::duration::parse_seconds;
use gatecal_cli::pipeline::{InputArgs, input_files, read_inputs};

/// Prints the shards of the inputs, one JSON object a line:
/// {"input", "pod", "since", "until", "read_from"}. Each shard is run as
/// `gate-dist --since SINCE --until UNTIL --emit-partial -` over the
/// input's lines from READ_FROM (SINCE less the warm-up) to UNTIL, and the
/// partials are merged with `gate-dist merge`. Lines past UNTIL are read
/// and not counted: a tail of a few minutes keeps the observed TTFT of the
/// last requests. Give every shard the EPP's config (--config), so that a
/// shard whose lines never show the bar does not assume the default.
/// Windows are aligned to multiples of --window since the epoch, so shards
/// of several inputs line up.
#[derive(Parser, Debug)]
#[command(name = "gate-dist plan", version = gatecal_cli::term::VERSION, max_term_width = 100)]
pub struct PlanArgs {
    /// Each shard's counted window (e.g. 1h, 15m; whole seconds).
    #[arg(long, value_name = "DURATION", value_parser = parse_seconds)]
    pub window: f64,

    /// Lines read before each window and not counted, so that the
    /// reconstruction starts warm (e.g. 5m; whole seconds).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_seconds)]
    pub warm_up: f64,

    #[command(flatten)]
    pub input: InputArgs,
}

/// A JSON string literal of `s`.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn rfc3339(t: i64) -> String {
    format!("{}Z", gatecal_render::num::utc(t as f64).replace(' ', "T"))
}

/// Runs `gate-dist plan`.
pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let whole = |v: f64, flag: &str| -> anyhow::Result<i64> {
        anyhow::ensure!(
            v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 1e12,
            "{flag} {v}s: give whole seconds"
        );
        Ok(v as i64)
    };
    let window = whole(args.window, "--window")?;
    anyhow::ensure!(window > 0, "--window: give a positive duration");
    let warm = whole(args.warm_up, "--warm-up")?;
    anyhow::ensure!(
        args.input.kubectl.is_none(),
        "--kubectl: plan reads files (the shards are cut from stored logs)"
    );
    let mut out = String::new();
    for input in &args.input.inputs {
        anyhow::ensure!(
            input != "-",
            "-: plan reads each input for its times; standard input cannot be sharded"
        );
        anyhow::ensure!(
            !std::path::Path::new(input).is_dir(),
            "{input}: a folder; give its files (plan cuts each file into its shards)"
        );
        let one = InputArgs {
            inputs: vec![input.clone()],
            quiet: true,
            list_deployments: false,
            emit_decisions: None,
            ..args.input.clone()
        };
        let mut span: Option<(f64, f64)> = None;
        let mut pods = BTreeSet::new();
        read_inputs(
            &one,
            input_files(&one)?,
            "gate-dist",
            |d| {
                if let Some(t) = d.ts.filter(|t| t.is_finite()) {
                    span = Some(span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
                }
                if let Some(p) = &d.epp_pod
                    && pods.len() < 64
                {
                    pods.insert(p.clone());
                }
            },
            |_| {},
        )?;
        let Some((first, last)) = span else {
            if !args.input.quiet {
                eprintln!("gate-dist: warning: {input}: no timed filter decision; no shard");
            }
            continue;
        };
        let pod = if pods.is_empty() {
            std::path::Path::new(input)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| input.clone())
        } else {
            pods.into_iter().collect::<Vec<_>>().join(",")
        };
        let mut start = (first as i64).div_euclid(window) * window;
        while (start as f64) <= last {
            out.push_str(&format!(
                "{{\"input\":{},\"pod\":{},\"since\":\"{}\",\"until\":\"{}\",\"read_from\":\"{}\"}}\n",
                json_str(input),
                json_str(&pod),
                rfc3339(start),
                rfc3339(start + window),
                rfc3339(start - warm),
            ));
            start += window;
        }
    }
    use std::io::Write;
    let mut w = std::io::stdout().lock();
    w.write_all(out.as_bytes())?;
    w.flush()?;
    Ok(())
}
