//! Parses log files and prints throughput, decisions and the ledger total.
//!
//! ```text
//! cargo run --release -p gatecal-parser --example parse_file -- FILE...
//! cargo run --release -p gatecal-parser --example parse_file -- --mem 5 FILE
//! ```
//!
//! `--threads N` (first) sets [`ParseOptions::threads`].
//! `--mem N` reads the first file into memory and parses it N times,
//! printing the fastest run (parser time without I/O).

use std::time::Instant;

use gatecal_parser::{InputSpec, Item, ParseOptions, parse_inputs, parse_slice};

/// The allocator of the gate-dist and recommend binaries, so that the
/// parser is measured as they run it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = ParseOptions::default();
    if args.first().map(String::as_str) == Some("--threads") && args.len() >= 2 {
        opts.threads = args[1].parse().unwrap_or(1);
        args.drain(..2);
    }
    if args.first().map(String::as_str) == Some("--mem") && args.len() >= 3 {
        let n: usize = args[1].parse().unwrap_or(3);
        let bytes = match std::fs::read(&args[2]) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: {}: {e}", args[2]);
                std::process::exit(2);
            }
        };
        let mut best = f64::MAX;
        let mut decisions = 0;
        for _ in 0..n.max(1) {
            let start = Instant::now();
            match parse_slice(&args[2], &bytes, &opts) {
                Ok(p) => decisions = p.decisions().count(),
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            }
            best = best.min(start.elapsed().as_secs_f64());
        }
        println!(
            "best of {n}: {best:.3} s, {:.1} MB/s, {decisions} decisions",
            bytes.len() as f64 / best / 1e6
        );
        return;
    }
    let inputs: Vec<InputSpec> = args.drain(..).map(|a| InputSpec::parse(&a)).collect();
    let start = Instant::now();
    let (mut decisions, mut stats) = (0u64, 0u64);
    let ledger = match parse_inputs(&inputs, &opts, |i| match i {
        Item::Decision(_) => decisions += 1,
        Item::VllmStats(_) => stats += 1,
    }) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let secs = start.elapsed().as_secs_f64();
    let t = &ledger.total;
    println!(
        "{:.3} s, {:.1} MB/s, {} lines ({} used, {} ignored, {} malformed), {} decisions, {} vLLM stats",
        secs,
        t.bytes as f64 / secs / 1e6,
        t.lines_total,
        t.lines_used,
        t.lines_ignored,
        t.lines_malformed,
        decisions,
        stats
    );
}
