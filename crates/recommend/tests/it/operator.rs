//! The recommend binary as an installed tool: completions, man page, help.

use std::process::{Command, Stdio};

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_recommend"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run recommend");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn generate_help_and_version() {
    assert!(run(&["--generate", "complete-bash"]).contains("--calibration"));
    assert!(run(&["--generate", "complete-zsh"]).contains("#compdef recommend"));
    assert!(run(&["--generate", "complete-fish"]).contains("complete -c recommend -l calibration"));
    assert!(run(&["--generate", "man"]).contains(".TH recommend 1"));
    let long = run(&["--help"]);
    assert!(long.contains("Examples:") && long.contains("--calibration calib.txt"));
    assert!(!run(&["-h"]).contains("Examples:"));
    assert!(run(&["--version"]).starts_with(&format!("recommend {}", env!("CARGO_PKG_VERSION"))));
}
