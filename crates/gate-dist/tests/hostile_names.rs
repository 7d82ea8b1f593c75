//! Log text reaches every output as plain text for its reader: a
//! namespace and pod names that hold a newline and a Markdown heading,
//! HTML, terminal escape sequences, a bell, NUL and other control
//! characters, a spreadsheet formula, a `|` and backticks, read from a real
//! log, through the binaries, in every format.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(p)
}

/// The namespace, as written inside a JSON string of the log.
const HOSTILE_JSON: &str = r#"=HYPERLINK(\"x\",\"y\")\n## injected <img src=x onerror=alert(1)> \u001b[31mred\u001b]0;title\u0007 | `tick` [a](javascript:e) \u0000\u000b\u007f\u009b\u202e"#;

/// The balanced fixture with every endpoint's namespace and pod name made
/// hostile.
fn hostile_log(dir: &Path) -> PathBuf {
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

fn run(bin: &str, args: &[&str]) -> Output {
    let out = Command::new(bin).args(args).output().expect("run");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn gate_dist(args: &[&str]) -> String {
    String::from_utf8(run(env!("CARGO_BIN_EXE_gate-dist"), args).stdout).unwrap()
}

/// No control character but line breaks (and tabs, where allowed).
fn no_controls(what: &str, text: &str) {
    for c in text.chars() {
        assert!(
            !c.is_control() || c == '\n' || c == '\r',
            "{what}: control {c:?} in output"
        );
        assert!(c != '\u{202e}', "{what}: bidi override in output");
    }
}

#[test]
fn the_deployment_is_named_by_the_hostile_pods() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let v: serde_json::Value =
        serde_json::from_str(&gate_dist(&[log.to_str().unwrap(), "--format", "json"])).unwrap();
    let name = v["deployments"][0]["name"].as_str().unwrap();
    // JSON carries the name exactly (serde escapes it).
    assert!(
        name.contains("\n## injected <img") && name.contains('\u{1b}'),
        "{name:?}"
    );
}

#[test]
fn table_output_has_no_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let t = gate_dist(&[log.to_str().unwrap(), "--format", "table"]);
    no_controls("table", &t);
    // The name stays on one line: no line starts with the injected text.
    assert!(
        t.lines()
            .all(|l| !l.trim_start().starts_with("## injected")),
        "{t}"
    );
    assert!(t.contains("[31mred"), "the text is kept, its ESC dropped");
}

#[test]
fn markdown_output_is_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let md = gate_dist(&[log.to_str().unwrap(), "--format", "markdown"]);
    no_controls("markdown", &md);
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
    // Every row of the deployments table has as many cells as its header
    // (an unescaped `|` would add one).
    let cells = |l: &str| l.replace(r"\|", "").matches('|').count();
    let mut lines = md.lines().peekable();
    while let Some(l) = lines.next() {
        if l.starts_with("| deployment |") {
            let n = cells(l);
            for row in lines.by_ref().take_while(|r| r.starts_with('|')) {
                assert_eq!(cells(row), n, "{row}");
            }
        }
    }
}

#[test]
fn csv_guards_the_formula_and_quotes() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let csv = gate_dist(&[log.to_str().unwrap(), "--format", "csv"]);
    let mut records = parse_csv(&csv);
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

/// RFC 4180 records (quoted fields may hold commas, quotes and newlines).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
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

#[test]
fn svg_is_well_formed_xml() {
    let dir = tempfile::tempdir().unwrap();
    let log = hostile_log(dir.path());
    let svg = dir.path().join("g.svg");
    gate_dist(&[
        log.to_str().unwrap(),
        "--format",
        "json",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let all: String = doc
        .descendants()
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        all.contains("<img src=x onerror=alert(1)>"),
        "kept as text: {all}"
    );
    assert_eq!(
        doc.descendants().filter(|n| n.has_tag_name("img")).count(),
        0
    );
}
