//! Driving a `--follow` run: its stdout lines as they come, and SIGINT.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A report line as JSON, naming the line when it is not.
pub fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// Each stdout line of `child` as it comes, with the time it came.
pub fn stdout_lines(child: &mut Child) -> mpsc::Receiver<(Instant, String)> {
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout piped");
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines() {
            let Ok(l) = l else { break };
            if tx.send((Instant::now(), l)).is_err() {
                break;
            }
        }
    });
    rx
}

/// Sends SIGINT to `child`, asserts it exits 0 with a last report marked
/// `follow.last`, and returns that report.
pub fn interrupt(mut child: Child, rx: &mpsc::Receiver<(Instant, String)>) -> serde_json::Value {
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    let mut tail: Vec<String> = rx.try_iter().map(|(_, l)| l).collect();
    if tail.is_empty() {
        tail.push(rx.recv_timeout(Duration::from_secs(5)).unwrap().1);
    }
    let end = json(tail.last().unwrap());
    assert_eq!(end["follow"]["last"], true);
    end
}

/// Appends `rest` to the log at `log` in pieces of `piece` lines, 100 ms
/// apart, as a log grows; then reads the reports from `rx`, after `first`,
/// until one has read more than `decisions` decisions (within 60 s): that
/// report.
pub fn append_and_wait(
    log: &Path,
    rest: &[&[u8]],
    piece: usize,
    rx: &mpsc::Receiver<(Instant, String)>,
    first: serde_json::Value,
    decisions: u64,
) -> serde_json::Value {
    let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    for chunk in rest.chunks(piece) {
        f.write_all(&chunk.concat()).unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = first;
    while last["follow"]["decisions_read"].as_u64().unwrap() < decisions {
        assert!(Instant::now() < deadline, "{}", last["follow"]);
        last = json(&rx.recv_timeout(Duration::from_secs(10)).unwrap().1);
    }
    last
}
