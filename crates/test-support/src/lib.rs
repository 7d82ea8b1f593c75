//! What the integration tests of gatecal's two binaries share (a
//! dev-dependency only, never published). Nothing here knows a binary's
//! path: the tests pass in their `env!("CARGO_BIN_EXE_…")`, and files of
//! the repository are found from this crate's own folder.

pub mod docs;
pub mod fail_if;
#[cfg(unix)]
pub mod follow;
pub mod hostile_names;
pub mod report;

pub use docs::{doc, fixture, root};
