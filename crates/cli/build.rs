//! Records the git commit the binaries are built from, for `--version`.
//! Outside a git checkout (a source tarball, a crate from a registry) or
//! without git, the version is the package version alone: this script
//! never fails the build.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(std::env::var_os("CARGO_MANIFEST_DIR")?)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=GATECAL_COMMIT");
    let commit = std::env::var("GATECAL_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=9", "HEAD"]));
    // Rebuild when HEAD moves: HEAD itself, the branch it points at, and
    // the packed refs.
    if commit.is_some() {
        let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(r);
        }
        for w in watch {
            if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", &w]) {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    }
    let suffix = commit.map(|c| format!(" ({c})")).unwrap_or_default();
    println!("cargo:rustc-env=GATECAL_VERSION_SUFFIX={suffix}");
}
