//! Output files written whole or not at all.
//!
//! A regular output file is written to a temporary file in its target's
//! folder (`.NAME.PID.N.tmp`: hidden, so a folder input never reads it) and
//! renamed onto the target once written in full ([`Temp::commit`]): a
//! reader, or a second run writing the same file, sees the old file or
//! one run's complete new one, never a mix or a part. A temporary file not
//! committed is removed: when its [`Temp`] is dropped (an error), by the
//! panic hook ([`crate::internal_error`]), and on SIGINT, SIGTERM or SIGHUP
//! ([`clean_up_on_signals`]), after which the process exits with 128 plus
//! the signal's number (130, 143, 129).
//!
//! Signals are caught with the `signal-hook` crate: its iterator waits for
//! them on a thread of its own (no code runs in the signal handler itself
//! but a write to a pipe), so the clean-up may take a lock and remove
//! files even while the main thread is blocked reading a pipe or a FIFO.
//! `ctrlc` was not taken: its handler is not told which signal came, and
//! the exit code differs between SIGINT and SIGTERM.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The temporary files not yet committed or removed.
static TEMPS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn temps() -> MutexGuard<'static, Vec<PathBuf>> {
    TEMPS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Longest part of the target's name kept in a temporary file's name
/// (names are at most 255 bytes on most file systems).
const NAME_KEPT: usize = 160;

/// A temporary file beside an output's target, removed unless committed.
#[derive(Debug)]
pub struct Temp {
    path: PathBuf,
    done: bool,
}

impl Temp {
    /// Creates a new temporary file in `dir` for the target named `name`
    /// (its permissions those of `like`, the file it replaces, if any).
    pub fn create(
        dir: &Path,
        name: &OsStr,
        like: Option<&fs::Metadata>,
    ) -> io::Result<(Temp, File)> {
        let name = name.to_string_lossy();
        let mut cut = name.len().min(NAME_KEPT);
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        let name = &name[..cut];
        let pid = std::process::id();
        let mut n = 0u32;
        loop {
            let path = dir.join(format!(".{name}.{pid}.{n}.tmp"));
            // Registered before it exists, so that a signal between the
            // two removes it too.
            let mut list = temps();
            match File::options().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    list.push(path.clone());
                    drop(list);
                    let temp = Temp { path, done: false };
                    if let Some(m) = like {
                        fs::set_permissions(&temp.path, m.permissions())?;
                    }
                    return Ok((temp, file));
                }
                // Left by an earlier process of the same id: another name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the file onto `target` (replacing it at once). Holds the
    /// list of temporary files meanwhile: a signal's clean-up waits for the
    /// rename, and once it has begun, no rename starts.
    pub fn commit(mut self, target: &Path) -> io::Result<()> {
        let mut list = temps();
        fs::rename(&self.path, target)?;
        list.retain(|p| p != &self.path);
        self.done = true;
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut list = temps();
        let _ = fs::remove_file(&self.path);
        list.retain(|p| p != &self.path);
    }
}

/// Removes every temporary file not committed, and returns the list
/// locked (empty): no commit starts afterwards. For a process about to
/// end (a signal, a panic).
pub fn remove_all() -> MutexGuard<'static, Vec<PathBuf>> {
    let mut list = temps();
    for p in list.drain(..) {
        let _ = fs::remove_file(p);
    }
    list
}

/// Exit code after signal `sig`: 128 plus its number, as a shell reports
/// a process the signal ended.
pub fn signal_exit_code(sig: i32) -> i32 {
    128 + sig
}

/// Whether SIGINT and SIGTERM are left to the run ([`defer_interrupts`]).
static DEFERRED: AtomicBool = AtomicBool::new(false);
/// Whether SIGINT or SIGTERM came while deferred.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// From now on, SIGINT and SIGTERM do not end the process: they are
/// noted ([`interrupted`]) for the run to end itself (`--follow` prints
/// its last report and exits 0). SIGHUP still ends it.
pub fn defer_interrupts() {
    DEFERRED.store(true, Ordering::Relaxed);
}

/// Whether SIGINT or SIGTERM came since [`defer_interrupts`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// On SIGINT, SIGTERM or SIGHUP: removes the temporary files of the
/// outputs not yet written in full and exits with 130, 143 or 129 (see the
/// module docs). Call once, at the start of `main`.
pub fn clean_up_on_signals() {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("signals".to_string())
            .spawn(move || {
                for sig in signals.forever() {
                    if sig != SIGHUP && DEFERRED.load(Ordering::Relaxed) {
                        INTERRUPTED.store(true, Ordering::Relaxed);
                        continue;
                    }
                    let _held = remove_all();
                    std::process::exit(signal_exit_code(sig));
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_is_removed_unless_committed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let (t, _) = Temp::create(d, OsStr::new("r.json"), None).unwrap();
        let p = t.path().to_path_buf();
        assert!(
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".r.json.")
        );
        assert!(p.exists());
        drop(t);
        assert!(!p.exists());
        let (t, _) = Temp::create(d, OsStr::new("r.json"), None).unwrap();
        let p = t.path().to_path_buf();
        t.commit(&d.join("r.json")).unwrap();
        assert!(!p.exists() && d.join("r.json").exists());
        assert!(!temps().contains(&p));
        // Two at once get two names; a long name is cut.
        let long = "x".repeat(300);
        let (a, _) = Temp::create(d, OsStr::new(&long), None).unwrap();
        let (b, _) = Temp::create(d, OsStr::new(&long), None).unwrap();
        assert_ne!(a.path(), b.path());
        assert!(a.path().file_name().unwrap().len() < 255);
    }
}
