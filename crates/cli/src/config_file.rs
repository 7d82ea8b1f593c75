//! Reading the EPP config files the flags name (`--config`,
//! `--candidate-config`, and `--config` again for `--emit-config`),
//! bounded and sniffed before any YAML parse.
//!
//! A file longer than [`MAX_CONFIG_BYTES`] is refused from its size (a
//! pipe or FIFO after reading one byte more than the bound), so a log
//! passed by mistake costs at most the bound in memory. A gzip stream, a
//! binary file and a JSON-lines log (one JSON object on each of its first
//! lines) are refused with a message saying what the file looks like and
//! what the flag takes.

use std::io::Read;

use anyhow::{Context, bail};
pub use gatecal_analysis::MAX_CONFIG_BYTES;

/// What the flags take, for the messages.
const TAKES: &str = "the flag takes the EPP's EndpointPickerConfig YAML, a ConfigMap holding it, a kind: List of those, or Helm values holding it; logs are the positional inputs";

/// Reads the config file `path` named by `flag` (`--config`, …) as text:
/// at most [`MAX_CONFIG_BYTES`], not compressed, not binary, not a
/// JSON-lines log. Every error names the flag and the file.
pub fn read(flag: &str, path: &str) -> anyhow::Result<String> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {flag} {path}"))?;
    let limit = MAX_CONFIG_BYTES as u64;
    if let Ok(m) = file.metadata()
        && m.is_file()
        && m.len() > limit
    {
        bail!(too_large(flag, path, &m.len().to_string()));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {flag} {path}"))?;
    if bytes.len() as u64 > limit {
        bail!(too_large(flag, path, &format!("more than {limit}")));
    }
    sniff(flag, path, bytes)
}

fn too_large(flag: &str, path: &str, size: &str) -> String {
    format!(
        "{flag} {path}: {size} bytes, more than the {MAX_CONFIG_BYTES} bytes (4 MiB) a config file may have; an EndpointPickerConfig is a few KiB: is this the EPP's config? ({TAKES})"
    )
}

/// The text of a config file's bytes, or why they are no config.
fn sniff(flag: &str, path: &str, bytes: Vec<u8>) -> anyhow::Result<String> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        bail!("{flag} {path}: a gzip-compressed file (a captured log?), not YAML; {TAKES}");
    }
    if bytes.contains(&0) {
        bail!("{flag} {path}: a binary file (it holds NUL bytes), not YAML; {TAKES}");
    }
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => bail!(
            "{flag} {path}: not UTF-8 text (byte {} is not valid UTF-8), so not YAML; {TAKES}",
            e.utf8_error().valid_up_to()
        ),
    };
    let mut lines = text.lines().map(str::trim_end).filter(|l| !l.is_empty());
    let object_line = |l: Option<&str>| l.is_some_and(|l| l.starts_with('{') && l.ends_with('}'));
    if object_line(lines.next()) && object_line(lines.next()) {
        bail!(
            "{flag} {path}: one JSON object per line, like a log or decision records, not an EndpointPickerConfig; {TAKES}"
        );
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    }

    /// A file of [`MAX_CONFIG_BYTES`] is read; one byte more is refused
    /// from its size, with the flag, the file, the size and the bound.
    #[test]
    fn size_bound_just_below_and_above() {
        let dir = tempfile::tempdir().unwrap();
        let line = format!("#{}\n", "x".repeat(1022));
        let at = line.repeat(MAX_CONFIG_BYTES / 1024);
        let ok = write(&dir, "at.yaml", at.as_bytes());
        assert_eq!(read("--config", &ok).unwrap().len(), MAX_CONFIG_BYTES);
        let over = write(&dir, "over.yaml", format!("{at}#").as_bytes());
        let e = read("--config", &over).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "--config {over}: 4194305 bytes, more than the 4194304"
            )),
            "{e}"
        );
    }

    /// Logs given by mistake are refused with what they look like, and
    /// cheaply: a gzip stream from its first two bytes, a JSON-lines log
    /// from its first two lines.
    #[test]
    fn logs_and_binaries_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let log = "{\"level\":\"info\",\"msg\":\"a\"}\n\n{\"level\":\"info\",\"msg\":\"b\"}\n";
        for (name, bytes, want) in [
            (
                "a.log.gz",
                b"\x1f\x8b\x08\x00rest".to_vec(),
                "gzip-compressed",
            ),
            ("a.log", log.as_bytes().to_vec(), "one JSON object per line"),
            ("a.bin", b"plugins:\0".to_vec(), "NUL bytes"),
            (
                "a.latin1",
                b"name: caf\xe9\n".to_vec(),
                "byte 9 is not valid UTF-8",
            ),
        ] {
            let p = write(&dir, name, &bytes);
            let e = read("--candidate-config", &p).unwrap_err().to_string();
            assert!(e.contains(&format!("--candidate-config {p}: ")), "{e}");
            assert!(e.contains(want), "{e}");
            assert!(e.contains("logs are the positional inputs"), "{e}");
        }
        // JSON configs (JSON is YAML) and one-line flow mappings are read.
        for ok in [
            "{\"plugins\": [{\"type\": \"prefix-cache-affinity-filter\"}]}\n",
            "{\n  \"plugins\": []\n}\n",
        ] {
            let p = write(&dir, "ok.json", ok.as_bytes());
            assert_eq!(read("--config", &p).unwrap(), ok);
        }
        let e = read("--config", "/no/such/epp.yaml").unwrap_err();
        assert!(format!("{e:#}").contains("cannot read --config /no/such/epp.yaml"));
    }
}
