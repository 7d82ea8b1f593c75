//! `--follow`'s allocator setting: freed pages go back to the system at
//! once, unless the user's environment sets mimalloc's purge delay (run
//! as child processes of this test binary, each with its environment).

use std::process::Command;

use gatecal_cli::allocator::{FOLLOW_PURGE_DELAY_MS, purge_freed_memory_at_once};

/// The child: sets the delay for follow mode and prints the one in force.
/// Run by [`the_environment_wins_over_the_follow_default`].
#[test]
#[ignore = "a child process of the_environment_wins_over_the_follow_default"]
fn child_prints_the_purge_delay() {
    println!("purge delay in force: {}", purge_freed_memory_at_once());
}

/// The delay in force in a child run with `env` (name, value) set and
/// mimalloc's delay variables otherwise removed.
fn delay_in_child(env: &[(&str, &str)]) -> std::ffi::c_long {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "allocator::child_prints_the_purge_delay",
        "--nocapture",
    ]);
    for name in [
        "MIMALLOC_PURGE_DELAY",
        "MIMALLOC_RESET_DELAY",
        "mimalloc_purge_delay",
        "mimalloc_reset_delay",
    ] {
        cmd.env_remove(name);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{env:?}: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("purge delay in force: "))
        .unwrap_or_else(|| panic!("{env:?}: no delay printed: {stdout}"));
    line.trim().parse().unwrap()
}

#[test]
fn the_environment_wins_over_the_follow_default() {
    // mimalloc's default (1 000 ms) is not what follow mode asks for.
    assert_ne!(FOLLOW_PURGE_DELAY_MS, 1000);
    assert_eq!(delay_in_child(&[]), FOLLOW_PURGE_DELAY_MS);
    assert_eq!(delay_in_child(&[("MIMALLOC_PURGE_DELAY", "250")]), 250);
    // The variable's old name, and mimalloc reads names in any case.
    assert_eq!(delay_in_child(&[("MIMALLOC_RESET_DELAY", "40")]), 40);
    assert_eq!(delay_in_child(&[("mimalloc_purge_delay", "-1")]), -1);
    // A value mimalloc cannot read leaves follow mode's (mimalloc warns).
    assert_eq!(
        delay_in_child(&[("MIMALLOC_PURGE_DELAY", "soon")]),
        FOLLOW_PURGE_DELAY_MS
    );
}
