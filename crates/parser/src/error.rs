//! The parser's error type.

use std::io;
use std::path::PathBuf;

use crate::ledger::MalformedLine;

/// An error that stops a parse: an input that cannot be read, a pattern that
/// matches nothing, or (with [`crate::ParseOptions::strict`]) a malformed line.
///
/// Malformed lines are not errors by default: they are counted in the
/// [`crate::Ledger`].
#[derive(Debug)]
#[non_exhaustive]
pub enum ParseError {
    /// An input could not be opened or read.
    Io {
        /// The path (`-` for stdin).
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A glob pattern is invalid.
    BadGlob {
        /// The pattern.
        pattern: String,
        /// Why it is invalid.
        message: String,
    },
    /// A path does not exist, or a glob or folder matched no file.
    NotFound {
        /// The path or pattern.
        path: PathBuf,
    },
    /// A malformed line, with [`crate::ParseOptions::strict`].
    Malformed(MalformedLine),
}

impl ParseError {
    /// The path the error is about, if any.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            ParseError::Io { path, .. } | ParseError::NotFound { path } => Some(path),
            ParseError::BadGlob { .. } | ParseError::Malformed(_) => None,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> ParseError {
        ParseError::Io {
            path: path.into(),
            source,
        }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The cause is the error's source: printed once, by whoever
            // prints the chain (`{:#}` of anyhow), not here as well.
            ParseError::Io { path, .. } => write!(f, "cannot read {}", path.display()),
            ParseError::BadGlob { pattern, message } => {
                write!(f, "invalid glob pattern {pattern:?}: {message}")
            }
            ParseError::NotFound { path } => {
                write!(f, "{}: no such file, or no file matched", path.display())
            }
            ParseError::Malformed(m) => write!(f, "malformed line at {m} (strict mode)"),
        }
    }
}

impl std::error::Error for ParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ParseError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
