//! A panic while inputs are read ends the process at once with the
//! internal-error message and its exit code, on every input path and
//! thread count (run as child processes of this test binary).

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gatecal_parser::{InputSpec, ParseOptions, parse_inputs};

const DEMO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/demo/glm-like.log.gz"
);

/// The child: installs the hook and reads `GATECAL_TEST_INPUT` (a path or
/// `-`) at `GATECAL_TEST_THREADS` threads with a sink that panics after a
/// few decisions. Run by [`a_panic_ends_the_process_with_an_internal_error`].
#[test]
#[ignore = "a child process of a_panic_ends_the_process_with_an_internal_error"]
fn child_panics_in_the_sink() {
    let input = std::env::var("GATECAL_TEST_INPUT").unwrap();
    let threads = std::env::var("GATECAL_TEST_THREADS")
        .unwrap()
        .parse()
        .unwrap();
    gatecal_cli::internal_error::install("gatecal-test");
    let opts = ParseOptions {
        threads,
        block_bytes: 16 << 10,
        ..ParseOptions::default()
    };
    let mut n = 0;
    let r = parse_inputs(&[InputSpec::parse(&input)], &opts, |_| {
        n += 1;
        if n > 20 {
            panic!("injected sink panic");
        }
    });
    // Only reached if the hook did not end the process.
    println!("returned {:?}", r.map(|l| l.total.lines_total));
}

#[test]
fn a_panic_ends_the_process_with_an_internal_error() {
    let dir = tempfile::tempdir().unwrap();
    let gz = std::fs::read(DEMO).unwrap();
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut plain)
        .unwrap();
    let plain_path = dir.path().join("epp.log");
    let gz_path = dir.path().join("epp.log.gz");
    std::fs::write(&plain_path, &plain).unwrap();
    std::fs::write(&gz_path, &gz).unwrap();
    // (name, input argument, stdin bytes)
    let cases: [(&str, &std::path::Path, Option<&[u8]>); 4] = [
        ("file at offsets", &plain_path, None),
        ("gzip file", &gz_path, None),
        ("stdin", std::path::Path::new("-"), Some(&plain)),
        ("gzip stdin", std::path::Path::new("-"), Some(&gz)),
    ];
    for threads in [1, 2, 4] {
        for (name, input, stdin) in cases {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--ignored",
                    "--exact",
                    "internal_error::child_panics_in_the_sink",
                    "--nocapture",
                ])
                .env("GATECAL_TEST_INPUT", input)
                .env("GATECAL_TEST_THREADS", threads.to_string())
                .env_remove("RUST_BACKTRACE")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let mut pipe = child.stdin.take().unwrap();
            let bytes = stdin.map(<[u8]>::to_vec).unwrap_or_default();
            // The child may end before it has read it all: a closed pipe.
            let writer = std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            });
            let start = Instant::now();
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break s;
                }
                if start.elapsed() > Duration::from_secs(60) {
                    let _ = child.kill();
                    panic!("{name}, {threads} threads: still running after 60 s (a hang)");
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            writer.join().unwrap();
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                status.code(),
                Some(gatecal_cli::internal_error::EXIT_CODE),
                "{name}, {threads} threads: {stderr} {stdout}"
            );
            assert!(
                stderr.contains(
                    "gatecal-test: internal error (a gatecal bug, please report it): injected sink panic at "
                ),
                "{name}, {threads} threads: {stderr}"
            );
            assert!(
                !stdout.contains("returned"),
                "{name}, {threads} threads: {stdout}"
            );
        }
    }
}
