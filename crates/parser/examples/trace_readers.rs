//! Reads a file N times in memory, as inputs are read (`inputs`: for a
//! trace input, the fast path for the Collector's `file`-exporter lines) or
//! by the general trace reader alone (`general`), and prints the decisions
//! read: commands to time side by side with `bench/ab.sh`
//! (docs/performance.md, "Trace input").
//!
//! ```text
//! cargo run --release -p gatecal-parser --example trace_readers -- inputs|general FILE N
//! ```

use gatecal_parser::{ParseOptions, parse_slice, trace_reference};

/// The allocator of the gate-dist and recommend binaries, so that the
/// parser is measured as they run it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(mode), Some(file), Some(n)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("usage: trace_readers inputs|general FILE N");
        std::process::exit(2);
    };
    let Ok(n) = n.parse::<usize>() else {
        eprintln!("error: N must be a count, got {n:?}");
        std::process::exit(2);
    };
    let bytes = std::fs::read(file).unwrap_or_else(|e| {
        eprintln!("error: {file}: {e}");
        std::process::exit(2);
    });
    let opts = ParseOptions::default();
    let mut decisions = 0;
    for _ in 0..n {
        let parsed = match mode.as_str() {
            "inputs" => parse_slice(file, &bytes, &opts),
            "general" => trace_reference::parse_slice(file, &bytes, &opts),
            other => {
                eprintln!("error: mode must be inputs or general, got {other:?}");
                std::process::exit(2);
            }
        };
        match parsed {
            Ok(p) => decisions = p.items.len(),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }
    println!("{decisions} items per read, {n} reads");
}
