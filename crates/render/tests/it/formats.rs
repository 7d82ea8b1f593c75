//! Every format rendered from the same small report.

use gatecal_analysis::{
    ConfigSet, DecisionInput, GateDist, GateDistOptions, GateDistReport, InputSummary,
};
use gatecal_filter::Candidate;
use gatecal_render::{Format, renderer};

fn decision(dep: &str, ts: f64, id: &str, sticky: i64, free: i64) -> DecisionInput {
    DecisionInput {
        deployment: dep.into(),
        ts: Some(ts),
        request_id: Some(id.into()),
        exact: Some(vec![
            Candidate::new("ns/a")
                .with_match(22, 25, 64)
                .with_in_flight_tokens(sticky),
            Candidate::new("ns/b")
                .with_match(0, 25, 64)
                .with_in_flight_tokens(free),
        ]),
        ..DecisionInput::default()
    }
}

fn report() -> GateDistReport {
    let mut g = GateDist::new(GateDistOptions::default(), ConfigSet::default());
    g.push(decision("alpha", 1.0, "r1", 41_000, 2_000));
    g.push(decision("alpha", 2.0, "r2", 300_000, 2_000));
    g.push(decision("beta", 3.0, "r3", 102_000, 2_000));
    g.finish(InputSummary {
        inputs: vec!["x.log".into()],
        lines_total: 10,
        lines_used: 7,
        lines_ignored: 2,
        lines_malformed: 1,
        first_malformed: vec!["x.log:4: not JSON".into()],
        ..InputSummary::default()
    })
}

fn render(f: Format) -> String {
    let mut out = Vec::new();
    renderer(f).gate_dist(&report(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn json_is_the_schema() {
    let v: serde_json::Value = serde_json::from_str(&render(Format::Json)).unwrap();
    assert_eq!(v["schema"], "gatecal.gate-dist/v3");
    assert_eq!(v["input"]["lines_total"], 10);
    assert_eq!(v["deployments"].as_array().unwrap().len(), 2);
    let a = &v["deployments"][0];
    assert_eq!(a["name"], "alpha");
    assert_eq!(a["decisions"], 2);
    assert_eq!(a["outcomes"]["load_override"], 1);
    assert_eq!(a["evidence"]["observed"], 2);
    assert_eq!(a["released_share"], 0.5);
    assert_eq!(a["bar_ms"], 18000.0);
    assert_eq!(a["pinned_worse"]["min_ms"], 5000.0);
    assert_eq!(a["self_check"]["replayed"], 0);
    assert_eq!(a["what_if"][0]["mode"], "static");
    assert_eq!(a["what_if"][6]["mode"], "matchedTokens");
    assert!(a["gate_input_ms"]["p50"].as_f64().unwrap() > 2400.0);
    assert_eq!(v["overall"]["decisions"], 3);
    assert_eq!(v["overall"]["pinned_worse"]["count"], 1);
}

#[test]
fn table_has_every_section_and_a_histogram() {
    let t = render(Format::Table);
    for needle in [
        "Input",
        "Gate input and releases",
        "Decisions by logged outcome",
        "What if",
        "matchedTokens, no ceiling",
        "Gate input histogram, alpha",
        "malformed: x.log:4: not JSON",
        "overall",
        "█",
    ] {
        assert!(t.contains(needle), "missing {needle:?} in\n{t}");
    }
    assert!(!t.contains('\u{1b}'), "no colour codes");
}

#[test]
fn markdown_tables_are_well_formed() {
    let md = render(Format::Markdown);
    assert!(md.starts_with("## gatecal gate-dist report"));
    for line in md.lines().filter(|l| l.starts_with('|')) {
        assert!(line.ends_with('|'), "{line}");
    }
    assert!(md.contains("| deployment | decisions | released |"));
    assert!(md.contains("```text"));
}

#[test]
fn csv_rows_match_the_header() {
    let csv = render(Format::Csv);
    // Comment lines explain the columns, then the header.
    let comments = csv.lines().take_while(|l| l.starts_with('#')).count();
    assert!(comments >= 2, "{csv}");
    assert!(csv.contains("\n# evidence_*: "), "{csv}");
    let all: Vec<&str> = csv.lines().skip(comments).collect();
    let n = all[0].split(',').count();
    // The findings come first, their texts quoted (RFC 4180).
    let findings = all[1..]
        .iter()
        .take_while(|l| l.split(',').nth(3) == Some("finding"))
        .count();
    assert!(findings >= 1, "{csv}");
    for l in &all[1..=findings] {
        assert_eq!(quoted_fields(l), n, "{l}");
    }
    let lines: Vec<&str> = std::iter::once(all[0])
        .chain(all[1 + findings..].iter().copied())
        .collect();
    for l in &lines[1..] {
        assert_eq!(l.split(',').count(), n, "{l}");
    }
    // One long table: each set of decisions as ran, then per what-if.
    let in_force: Vec<&&str> = lines.iter().filter(|l| l.contains(",in_force,")).collect();
    assert_eq!(in_force.len(), 3, "alpha, beta, overall");
    assert!(
        in_force[0].starts_with("alpha,,,in_force,"),
        "{}",
        in_force[0]
    );
    assert!(in_force[2].starts_with("overall,,,in_force,"));
    let what_ifs = lines
        .iter()
        .filter(|l| l.starts_with("alpha,,,static,"))
        .count();
    assert!(what_ifs >= 1, "{csv}");
}

/// The fields of one CSV line, quotes honoured.
fn quoted_fields(line: &str) -> usize {
    let (mut n, mut quoted) = (1, false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => n += 1,
            _ => {}
        }
    }
    n
}

/// `FORMATS` is the one list of formats: each row's names and extensions
/// lead back to it, its renderer writes both reports, and docs/usage.md's
/// `--format` row names it; CONTRIBUTING.md's recipe for a new format is
/// one new file and two edits (the variant and its row, and the docs).
#[test]
fn every_format_is_one_row() {
    use gatecal_analysis::{ConfigSet, Recommend, RecommendOptions};
    use gatecal_render::FORMATS;
    let usage = include_str!("../../../../docs/usage.md");
    let row = usage
        .lines()
        .find(|l| l.starts_with("| `--format "))
        .expect("the --format row of docs/usage.md");
    let rec = Recommend::new(RecommendOptions::default(), ConfigSet::default())
        .finish(InputSummary::default());
    for f in FORMATS {
        assert_eq!(Format::parse(f.name), Some(f.format));
        for a in f.aliases {
            assert_eq!(Format::parse(a), Some(f.format), "{a}");
        }
        for e in f.extensions {
            assert_eq!(
                Format::of_extension(&e.to_uppercase()),
                Some(f.format),
                "{e}"
            );
        }
        assert!(!f.extensions.is_empty(), "{}: no -o extension", f.name);
        let mut out = Vec::new();
        renderer(f.format).gate_dist(&report(), &mut out).unwrap();
        assert!(!out.is_empty(), "{}", f.name);
        let mut out = Vec::new();
        renderer(f.format).recommend(&rec, &mut out).unwrap();
        assert!(!out.is_empty(), "{}", f.name);
        assert!(
            row.contains(f.name),
            "docs/usage.md --format lacks {}",
            f.name
        );
    }
    let names: std::collections::HashSet<&str> = FORMATS.iter().map(|f| f.name).collect();
    assert_eq!(names.len(), FORMATS.len(), "a format named twice");
    let contributing = include_str!("../../../../CONTRIBUTING.md");
    let recipe = &contributing[contributing
        .find("### Add an output format")
        .expect("the recipe")..];
    let recipe = &recipe[..recipe[4..].find("\n### ").map_or(recipe.len(), |i| i + 4)];
    let files: Vec<&str> = recipe.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(files.len(), 3, "one new file and two edits: {files:?}");
    for f in [
        "crates/render/src/lib.rs",
        "crates/render/src/NEW.rs",
        "docs/usage.md",
    ] {
        assert!(recipe.contains(&format!("| `{f}`")), "{f}");
    }
}
