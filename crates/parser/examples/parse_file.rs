//! Parses log files and prints throughput, decisions and the ledger total.
//!
//! ```text
//! cargo run --release -p gatecal-parser --example parse_file -- FILE...
//! ```

use std::time::Instant;

use gatecal_parser::{InputSpec, Item, ParseOptions, parse_inputs};

fn main() {
    let inputs: Vec<InputSpec> = std::env::args()
        .skip(1)
        .map(|a| InputSpec::parse(&a))
        .collect();
    let start = Instant::now();
    let (mut decisions, mut stats) = (0u64, 0u64);
    let ledger = match parse_inputs(&inputs, &ParseOptions::default(), |i| match i {
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
