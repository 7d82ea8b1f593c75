//! Reading a run's report.

use std::process::Output;

/// The JSON a successful run printed; a failed run fails the test with
/// `what` and its stderr.
pub fn ok_json(out: &Output, what: &str) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{what}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
