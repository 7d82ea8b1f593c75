//! Where output goes, which format by default, and how errors become exit codes.
//!
//! Exit codes: 0 on success and when the reader closed the pipe
//! (`gate-dist … | head`), 1 when `--strict` found malformed lines, 2 on
//! usage or I/O errors (the message names the path), 101 on an internal
//! error (a panic: [`crate::internal_error`]).

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use gatecal_render::Format;

/// `--strict` found malformed lines: exit 1.
#[derive(Debug)]
pub struct StrictFailure(pub String);

impl fmt::Display for StrictFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StrictFailure {}

/// Whether an error is, somewhere in its chain, a closed pipe.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Maps a binary's result to its exit code, printing the error on stderr.
pub fn exit(bin: &str, result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<StrictFailure>().is_some() => {
            eprintln!("{bin}: {e:#}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("{bin}: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The format asked for, or the default: a table on a terminal, JSON otherwise.
pub fn resolve_format(asked: Option<&str>, output_is_terminal: bool) -> anyhow::Result<Format> {
    match asked {
        Some(s) => Format::parse(s)
            .with_context(|| format!("unknown --format {s:?} (table, markdown, json, csv)")),
        None if output_is_terminal => Ok(Format::Table),
        None => Ok(Format::Json),
    }
}

/// Whether the report goes to a terminal (no `-o`, stdout is a tty).
pub fn stdout_is_terminal(output: Option<&Path>) -> bool {
    output.is_none() && io::stdout().is_terminal()
}

/// Writes with `f` to `-o FILE` (or `-` / none for stdout), buffered, flushed.
pub fn write_output(
    output: Option<&Path>,
    f: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> anyhow::Result<()> {
    match output.filter(|p| p.as_os_str() != "-") {
        Some(p) => {
            let file = File::create(p).with_context(|| format!("cannot create {}", p.display()))?;
            let mut w = BufWriter::new(file);
            f(&mut w).with_context(|| format!("cannot write {}", p.display()))?;
            w.flush()
                .with_context(|| format!("cannot write {}", p.display()))?;
        }
        None => {
            let stdout = io::stdout();
            let mut w = BufWriter::new(stdout.lock());
            f(&mut w).context("cannot write to stdout")?;
            w.flush().context("cannot write to stdout")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_pipe_is_found_in_the_chain() {
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).context("writing");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }

    #[test]
    fn formats() {
        assert_eq!(resolve_format(None, true).unwrap(), Format::Table);
        assert_eq!(resolve_format(None, false).unwrap(), Format::Json);
        assert_eq!(resolve_format(Some("md"), false).unwrap(), Format::Markdown);
        assert!(resolve_format(Some("xml"), false).is_err());
    }

    #[test]
    fn writes_files_and_names_bad_paths() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.txt");
        write_output(Some(&p), |w| w.write_all(b"hi")).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "hi");
        let bad = dir.path().join("no/such/dir/r.txt");
        let e = write_output(Some(&bad), |w| w.write_all(b"x")).unwrap_err();
        assert!(format!("{e:#}").contains("no/such/dir/r.txt"));
    }
}
