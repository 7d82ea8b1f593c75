//! The terminal around a run: messages on stderr (in colour on a terminal,
//! unless `NO_COLOR` is set, or as `--color` says), the `--version` text, and whether stdin is
//! an idle terminal.

use std::io::{self, IsTerminal};
use std::sync::atomic::{AtomicU8, Ordering};

/// The version `--version` prints: the package version, and the git commit
/// when the binary was built from a git checkout (`0.1.0 (1a2b3c4d5)`).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), env!("GATECAL_VERSION_SUFFIX"));

/// `--color`: when messages on stderr are coloured.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    /// Always (also into a file or pipe, and whatever `NO_COLOR` says).
    Always,
    /// Never.
    Never,
}

/// The `--color` choice in force: 0 auto, 1 always, 2 never.
static COLOR: AtomicU8 = AtomicU8::new(0);

/// Sets the `--color` choice for the rest of the run.
pub fn set_color(c: ColorChoice) {
    COLOR.store(
        match c {
            ColorChoice::Auto => 0,
            ColorChoice::Always => 1,
            ColorChoice::Never => 2,
        },
        Ordering::Relaxed,
    );
}

/// Whether messages on stderr are coloured: as `--color` says; with
/// `auto`, when stderr is a terminal and `NO_COLOR` is unset or empty
/// (<https://no-color.org>).
pub fn stderr_colour() -> bool {
    match COLOR.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => colour_allowed(std::env::var_os("NO_COLOR").as_deref()) && io::stderr().is_terminal(),
    }
}

fn colour_allowed(no_color: Option<&std::ffi::OsStr>) -> bool {
    no_color.is_none_or(|v| v.is_empty())
}

/// Message kinds on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// `error:` in bold red.
    Error,
    /// `warning:` in bold yellow.
    Warning,
    /// `note:` in bold cyan.
    Note,
}

/// `BIN: LEVEL: MESSAGE`, the level coloured when `colour`. The message
/// is made plain for a terminal (it may quote log text: a deployment or
/// file name): one line, no control character.
pub fn message(bin: &str, level: Level, msg: &str, colour: bool) -> String {
    let msg = gatecal_render::escape::terminal(msg);
    let (word, code) = match level {
        Level::Error => ("error", "1;31"),
        Level::Warning => ("warning", "1;33"),
        Level::Note => ("note", "1;36"),
    };
    if colour {
        format!("{bin}: \x1b[{code}m{word}:\x1b[0m {msg}")
    } else {
        format!("{bin}: {word}: {msg}")
    }
}

/// Prints `BIN: LEVEL: MESSAGE` on stderr, coloured on a terminal.
pub fn eprint(bin: &str, level: Level, msg: &str) {
    eprintln!("{}", message(bin, level, msg, stderr_colour()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_when_asked_and_allowed() {
        assert_eq!(
            message("gate-dist", Level::Warning, "thin", false),
            "gate-dist: warning: thin"
        );
        let c = message("gate-dist", Level::Error, "x", true);
        assert!(c.contains("\x1b[1;31merror:\x1b[0m"), "{c:?}");
        assert!(colour_allowed(None));
        assert!(colour_allowed(Some("".as_ref())));
        assert!(!colour_allowed(Some("1".as_ref())));
    }

    #[test]
    fn log_text_in_a_message_stays_plain() {
        assert_eq!(
            message(
                "gate-dist",
                Level::Error,
                "found: a\n## b \x1b[31mc\x07",
                false
            ),
            "gate-dist: error: found: a ## b [31mc"
        );
    }

    #[test]
    fn version_starts_with_the_package_version() {
        assert!(VERSION.starts_with(env!("CARGO_PKG_VERSION")));
    }
}
