//! A real log whose
//! namespace and pod names hold a newline and a Markdown heading, HTML,
//! terminal escape sequences, a bell, NUL and other control characters, a
//! spreadsheet formula, a `|` and backticks; and the checks that each
//! output format shows that text as plain text for its reader.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fixture of the repository.
pub fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(p)
}

/// The namespace, as written inside a JSON string of the log.
pub const HOSTILE_JSON: &str = r#"=HYPERLINK(\"x\",\"y\")\n## injected <img src=x onerror=alert(1)> \u001b[31mred\u001b]0;title\u0007 | `tick` [a](javascript:e) \u0000\u000b\u007f\u009b\u202e"#;

/// The balanced fixture with every endpoint's namespace and pod name made
/// hostile, written to `dir/hostile.log`.
pub fn hostile_log(dir: &Path) -> PathBuf {
    let log = std::fs::read_to_string(fixture("balanced/epp.log")).unwrap();
    // In the reflected dumps the namespace sits inside an escaped JSON string.
    let nested = HOSTILE_JSON.replace('\\', "\\\\").replace('"', "\\\"");
    let log = log
        .replace(
            r#""namespace":"llm-d""#,
            &format!(r#""namespace":"{HOSTILE_JSON}""#),
        )
        .replace(
            r#""Namespace":"llm-d"#,
            &format!(r#""Namespace":"{HOSTILE_JSON}"#),
        )
        .replace(
            r#"Namespace\":\"llm-d"#,
            &format!(r#"Namespace\":\"{nested}"#),
        )
        // The deployment is named after its pods: make them hostile too.
        .replace("qwen3-32b-decode", &format!("{HOSTILE_JSON}-decode"));
    let p = dir.join("hostile.log");
    std::fs::write(&p, log).unwrap();
    p
}

/// Runs `bin`, which must succeed.
pub fn run(bin: &str, args: &[&str]) -> Output {
    let out = Command::new(bin).args(args).output().expect("run");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A `--config` file for `NAME=FILE`, written to `dir/config.yaml`.
pub fn config_file(dir: &Path) -> PathBuf {
    let p = dir.join("config.yaml");
    std::fs::write(
        &p,
        "plugins:\n- type: prefix-cache-affinity-filter\n  parameters:\n    maxTTFTPenaltyMs: 5000\n",
    )
    .unwrap();
    p
}

/// Runs `bin` on the hostile log with a `--config` for no deployment: the
/// error lists the deployments found, plain, on one line.
pub fn unknown_config_error_is_plain(bin: &str, dir: &Path) {
    let log = hostile_log(dir);
    let config = format!("nosuch={}", config_file(dir).display());
    let out = Command::new(bin)
        .args([
            log.to_str().unwrap(),
            "--config",
            &config,
            "--format",
            "json",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("the deployments found are: =HYPERLINK"),
        "{err}"
    );
    table_is_plain("stderr", &err);
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `--list-deployments` on the hostile log: one line for the name, plain.
pub fn list_is_plain(bin: &str, dir: &Path) {
    let log = hostile_log(dir);
    let out = run(bin, &[log.to_str().unwrap(), "--list-deployments"]);
    let text = String::from_utf8(out.stdout).unwrap();
    table_is_plain("--list-deployments", &text);
    assert!(
        text.lines().next().unwrap().starts_with("=HYPERLINK"),
        "{text}"
    );
}

/// No control character but line breaks.
pub fn no_controls(what: &str, text: &str) {
    for c in text.chars() {
        assert!(
            !c.is_control() || c == '\n' || c == '\r',
            "{what}: control {c:?} in output"
        );
        assert!(c != '\u{202e}', "{what}: bidi override in output");
    }
}

/// The JSON report's first deployment carries the name exactly (serde
/// escapes it).
pub fn json_keeps_the_name(json: &str) {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let name = v["deployments"][0]["name"].as_str().unwrap();
    assert!(
        name.contains("\n## injected <img") && name.contains('\u{1b}'),
        "{name:?}"
    );
}

/// A terminal table (or stderr): no control character, the name on one
/// line, its text kept.
pub fn table_is_plain(what: &str, t: &str) {
    no_controls(what, t);
    assert!(
        t.lines()
            .all(|l| !l.trim_start().starts_with("## injected")),
        "{what}: {t}"
    );
    assert!(
        t.contains("[31mred"),
        "{what}: the text is kept, its ESC dropped"
    );
}

/// Markdown: no control character, heading, raw HTML or link from the
/// log; `|` and backticks escaped; every table row as many cells as its
/// header.
pub fn markdown_is_plain(md: &str) {
    no_controls("markdown", md);
    for l in md.lines() {
        assert!(!l.starts_with("## injected"), "heading injected: {l}");
        if l.starts_with('|') {
            assert!(l.ends_with('|'), "{l}");
        }
    }
    assert!(!md.contains("<img"), "raw HTML passed");
    assert!(md.contains("&lt;img src=x onerror=alert(1)&gt;"), "{md}");
    assert!(!md.contains("](javascript:e)"), "a link passed");
    assert!(md.contains(r"\`tick\`") && md.contains(r"\|"), "{md}");
    // An unescaped `|` would add a cell.
    let cells = |l: &str| l.replace(r"\|", "").matches('|').count();
    let mut tables = 0;
    let mut lines = md.lines().peekable();
    while let Some(l) = lines.next() {
        if l.starts_with("| deployment |") {
            tables += 1;
            let n = cells(l);
            for row in lines.by_ref().take_while(|r| r.starts_with('|')) {
                assert_eq!(cells(row), n, "{row}");
            }
        }
    }
    assert!(tables > 0, "no deployment table: {md}");
}

/// CSV: every record as wide as the header, no cell starting a formula,
/// the deployment's cells guarded.
pub fn csv_is_guarded(csv: &str) {
    let mut records = parse_csv(csv);
    let header = records.remove(0);
    assert!(!records.is_empty());
    for r in &records {
        assert_eq!(r.len(), header.len(), "{r:?}");
        for f in r {
            assert!(!f.starts_with(['=', '+', '@']), "unguarded {f:?}");
            if f.starts_with('-') {
                assert!(f.parse::<f64>().is_ok(), "unguarded {f:?}");
            }
        }
    }
    let dep = records
        .iter()
        .find(|r| r[0].contains("HYPERLINK"))
        .expect("the deployment's rows");
    assert!(dep[0].starts_with("'=HYPERLINK("), "{:?}", dep[0]);
}

/// RFC 4180 records (quoted fields may hold commas, quotes and newlines),
/// after the `#` comment lines the reports open with.
pub fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut text = text;
    while text.starts_with('#') {
        text = text.split_once('\n').map_or("", |(_, rest)| rest);
    }
    let mut records = Vec::new();
    let (mut rec, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => rec.push(std::mem::take(&mut field)),
            (false, '\n') => {
                rec.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut rec));
            }
            (false, '\r') => {}
            (false, c) => field.push(c),
        }
    }
    assert!(!quoted, "unterminated quote");
    records
}
