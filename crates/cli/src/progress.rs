//! Progress on stderr while the inputs are read: bytes read of the total,
//! percent, rate and ETA (indicatif). Only on a terminal, only for inputs
//! of at least [`MIN_BYTES`] (or, for stdin and pipes, after a second), and
//! cleared before the report is written.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gatecal_parser::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Inputs smaller than this read without a progress bar (about a second
/// of reading or less).
pub const MIN_BYTES: u64 = 8 << 20;

/// A progress display running on its own thread.
pub struct Display {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Display {
    /// Starts showing `progress` (and the `decisions` counted so far).
    pub fn start(progress: Progress, decisions: Arc<AtomicU64>) -> Display {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || show(&progress, &decisions, &flag))
            .ok();
        Display { stop, thread }
    }

    /// Stops and clears the display.
    pub fn finish(mut self) {
        self.end();
    }

    fn end(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        self.end();
    }
}

fn show(progress: &Progress, decisions: &AtomicU64, stop: &AtomicBool) {
    let start = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    while !stop.load(Ordering::Relaxed) {
        if bar.is_none() {
            bar = match progress.total() {
                Some(Some(total)) if total >= MIN_BYTES => Some(sized(total)),
                Some(None) if start.elapsed() >= Duration::from_secs(1) => Some(streaming()),
                _ => None,
            };
        }
        if let Some(b) = &bar {
            let read = progress.read();
            b.set_position(b.length().map_or(read, |l| read.min(l)));
            b.set_message(format!(
                "{} decisions",
                grouped(decisions.load(Ordering::Relaxed))
            ));
        }
        // Look often until the bar is up, so that it shows early.
        let ms = if bar.is_some() { 50 } else { 10 };
        std::thread::sleep(Duration::from_millis(ms));
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

fn sized(total: u64) -> ProgressBar {
    let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{bar:30} {bytes}/{total_bytes} ({percent}%), {binary_bytes_per_sec}, ETA {eta}, {msg}",
    ) {
        b.set_style(style.progress_chars("█▌ "));
    }
    b
}

fn streaming() -> ProgressBar {
    let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {bytes} read, {binary_bytes_per_sec}, {msg}")
    {
        b.set_style(style);
    }
    b.enable_steady_tick(Duration::from_millis(100));
    b
}

/// `1,234,567`.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(1234567), "1,234,567");
        assert_eq!(grouped(100), "100");
    }
}
