//! Terminal tables (comfy-table), with a compact text histogram.

use std::io::{self, Write};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Width};
use gatecal_analysis::{GateDistReport, RecommendReport};

use crate::sections::{Section, gate_dist_sections, recommend_sections, text_histogram};
use crate::{Renderer, escape};

/// Terminal tables. No colour: output is the same on a terminal and in a pipe.
#[derive(Clone, Debug)]
pub struct Table {
    /// Width to fit in, in columns; `None`: every table at its full width.
    pub width: Option<u16>,
    /// How the report was made, for its summary.
    pub run: crate::markdown::RunInfo,
}

impl Default for Table {
    /// `$COLUMNS` when set (at least 40), else full width.
    fn default() -> Self {
        Table {
            width: columns_env(),
            run: crate::markdown::RunInfo::default(),
        }
    }
}

/// Writes the summary that opens a report, under its title.
pub(crate) fn write_summary(
    lines: &[crate::summary::SummaryLine],
    width: Option<u16>,
    w: &mut dyn Write,
) -> io::Result<()> {
    writeln!(w, "Summary")?;
    for l in crate::summary::terminal_lines(lines, width.map(|w| w.saturating_sub(2))) {
        writeln!(w, "  {l}")?;
    }
    writeln!(w)
}

/// `$COLUMNS`, when set to a number (at least 40).
pub fn columns_env() -> Option<u16> {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .map(|c| c.max(40))
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// The widest line of each column, and its longest word.
fn column_widths(s: &Section) -> (Vec<usize>, Vec<usize>) {
    let n = s.headers.len();
    let (mut full, mut word) = (vec![0; n], vec![0; n]);
    for row in std::iter::once(&s.headers).chain(&s.rows) {
        for (i, cell) in row.iter().enumerate().take(n) {
            for line in cell.lines() {
                full[i] = full[i].max(chars(line));
            }
            for w in cell.split_whitespace() {
                word[i] = word[i].max(chars(w));
            }
        }
    }
    (full, word)
}

/// Width of a table with these column widths: a space of padding on each
/// side of a cell and a rule between and around the cells.
fn table_width(widths: impl Iterator<Item = usize>) -> usize {
    let (mut sum, mut n) = (0, 0);
    for w in widths {
        sum += w + 2;
        n += 1;
    }
    sum + n + 1
}

/// Whether a cell reads as a figure (digits, a sign, a share, a dash).
fn figure(c: &str) -> bool {
    let t = c.trim().trim_start_matches(['-', '−', '+', '≥', '<', '>']);
    t.is_empty() || t == "–" || t.starts_with(|ch: char| ch.is_ascii_digit())
}

/// The key columns of a section: the leading columns whose cells are all
/// text (`deployment`, `config`, `rule`), at most three, at least the
/// first; a split table repeats them so each part's rows can be matched.
fn key_columns(s: &Section) -> usize {
    let n = s.headers.len();
    // A dash is no figure and no name: it goes with either.
    let dash = |v: &str| matches!(v.trim(), "–" | "-" | "");
    let text = |c: usize| {
        let cells = || s.rows.iter().filter_map(|r| r.get(c));
        cells().any(|v| !dash(v)) && cells().all(|v| dash(v) || !figure(v))
    };
    (1..n.min(3)).take_while(|&c| text(c)).count() + 1
}

/// The columns of each table a section is drawn as in `width` columns:
/// all of them when their words fit (cells wrap between words), else
/// groups that each repeat the `keys` leading (naming) columns, so that no
/// word is split and each part's rows name their row.
fn column_groups(word: &[usize], keys: usize, width: usize) -> Vec<Vec<usize>> {
    let n = word.len();
    if n == 0 || table_width(word.iter().copied()) <= width {
        return vec![(0..n).collect()];
    }
    // Keys that leave no room for a figure are cut back to the first.
    let mut keys = keys.clamp(1, n);
    while keys > 1 && table_width((0..keys).map(|c| word[c]).chain([8])) > width {
        keys -= 1;
    }
    let lead: Vec<usize> = (0..keys).collect();
    let mut groups = Vec::new();
    let mut g = lead.clone();
    for i in keys..n {
        let with = table_width(g.iter().chain(std::iter::once(&i)).map(|&c| word[c]));
        if with > width && g.len() > keys {
            groups.push(std::mem::replace(&mut g, lead.clone()));
        }
        g.push(i);
    }
    groups.push(g);
    groups
}

fn draw(s: &Section, cols: &[usize], word: &[usize], width: Option<u16>) -> comfy_table::Table {
    let keys = key_columns(s);
    let pick = |row: &[String]| -> Vec<String> {
        cols.iter()
            .map(|&c| row.get(c).cloned().unwrap_or_default())
            .collect()
    };
    let mut t = comfy_table::Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_header(pick(&s.headers));
    match width {
        Some(w) => {
            t.set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(w);
        }
        None => {
            t.set_content_arrangement(ContentArrangement::Disabled);
        }
    }
    for r in &s.rows {
        t.add_row(pick(r));
    }
    for (i, &c) in cols.iter().enumerate() {
        if let Some(col) = t.column_mut(i) {
            if c >= keys {
                col.set_cell_alignment(CellAlignment::Right);
            }
            // comfy-table counts the padding in the width.
            let least = u16::try_from(word[c] + 2).unwrap_or(u16::MAX);
            col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(least)));
        }
    }
    t
}

/// `text` in lines of at most `width` characters, broken between words, the
/// first after `indent` and the rest after `indent` and two spaces more (so
/// that where one note ends and the next begins shows, a long list of
/// deployments included); a word longer than a line stays whole.
fn wrap(text: &str, indent: &str, width: Option<u16>) -> Vec<String> {
    let Some(width) = width else {
        return vec![format!("{indent}{text}")];
    };
    let hang = format!("{indent}  ");
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let lead = if lines.is_empty() { indent } else { &hang };
        let room = (width as usize).saturating_sub(chars(lead)).max(20);
        if !line.is_empty() && chars(&line) + 1 + chars(word) > room {
            lines.push(format!("{lead}{line}"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        let lead = if lines.is_empty() { indent } else { &hang };
        lines.push(format!("{lead}{line}"));
    }
    lines
}

/// One line of a YAML block indented by two, fitted to `width`: a comment
/// wraps between words, each continuation a comment too (`#   `), so the
/// block still pastes as YAML; keys and values stay whole.
fn yaml_line(line: &str, width: Option<u16>) -> Vec<String> {
    let body = line.trim_start();
    let lead = format!("  {}", &line[..line.len() - body.len()]);
    match body.strip_prefix('#') {
        Some(comment) if width.is_some_and(|w| chars(&lead) + chars(body) > usize::from(w)) => {
            // `wrap` hangs continuations two spaces under the text: `#   `.
            wrap(comment.trim_start(), &format!("{lead}# "), width)
        }
        _ => vec![format!("{lead}{body}")],
    }
}

/// Writes sections as tables, with titles and notes. With a `width`, each
/// table fits it: cells wrap between words, and a table whose words do not
/// fit is split into several that repeat its first column. Without one,
/// every table is drawn at its full width (for pipes and files).
pub fn write_sections(
    sections: &[Section],
    width: Option<u16>,
    w: &mut dyn Write,
) -> io::Result<()> {
    let sections: Vec<Section> = sections.iter().map(plain).collect();
    for s in &sections {
        writeln!(w, "{}", s.title)?;
        let (full, word) = column_widths(s);
        let fits = |cols: &[usize]| {
            width.is_none_or(|wd| table_width(cols.iter().map(|&c| full[c])) <= wd as usize)
        };
        let all: Vec<usize> = (0..s.headers.len()).collect();
        let groups = if fits(&all) {
            vec![all]
        } else {
            column_groups(&word, key_columns(s), width.map_or(usize::MAX, usize::from))
        };
        for cols in &groups {
            let wd = if fits(cols) { None } else { width };
            writeln!(w, "{}", draw(s, cols, &word, wd))?;
        }
        for n in &s.notes {
            for line in wrap(n, "  ", width) {
                writeln!(w, "{line}")?;
            }
        }
        writeln!(w)?;
    }
    Ok(())
}

/// The section with every title, header, cell and note made plain
/// terminal text ([`escape::terminal`]).
fn plain(s: &Section) -> Section {
    let t = |x: &String| escape::terminal(x).into_owned();
    Section {
        title: t(&s.title),
        headers: s.headers.iter().map(t).collect(),
        rows: s.rows.iter().map(|r| r.iter().map(t).collect()).collect(),
        notes: s.notes.iter().map(t).collect(),
    }
}

/// Writes the glossary of the terms `printed` holds, wrapped to `width`.
pub(crate) fn write_glossary(
    printed: &str,
    width: Option<u16>,
    w: &mut dyn Write,
) -> io::Result<()> {
    let used = crate::glossary::used_in(printed);
    if used.is_empty() {
        return Ok(());
    }
    writeln!(w, "Glossary")?;
    for (term, what) in used {
        for line in wrap(&format!("{term}: {what}."), "  ", width) {
            writeln!(w, "{line}")?;
        }
    }
    writeln!(w)
}

impl Renderer for Table {
    fn gate_dist(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()> {
        self.gate_dist_body(report, w)?;
        // The terms are looked for in the unwrapped text (a header split
        // over lines still names its term).
        let mut whole = Vec::new();
        self.unwrapped().gate_dist_body(report, &mut whole)?;
        write_glossary(&String::from_utf8_lossy(&whole), self.width, w)
    }

    fn recommend(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()> {
        self.recommend_body(report, w)?;
        let mut whole = Vec::new();
        self.unwrapped().recommend_body(report, &mut whole)?;
        write_glossary(&String::from_utf8_lossy(&whole), self.width, w)
    }

    fn compare(
        &self,
        report: &gatecal_analysis::compare::CompareReport,
        w: &mut dyn Write,
    ) -> io::Result<()> {
        crate::compare::write_table(report, self.width, &self.run, w)
    }
}

impl Table {
    /// This table at full width.
    fn unwrapped(&self) -> Table {
        Table {
            width: None,
            run: self.run.clone(),
        }
    }

    fn gate_dist_body(&self, report: &GateDistReport, w: &mut dyn Write) -> io::Result<()> {
        write_summary(
            &crate::summary::gate_dist_summary(report, &self.run),
            self.width,
            w,
        )?;
        let mut sections = vec![crate::sections::findings_section(&report.findings)];
        sections.extend(gate_dist_sections(report));
        write_sections(&sections, self.width, w)?;
        for d in &report.deployments {
            writeln!(
                w,
                "Gate input histogram, {} (n = {}, ms)",
                escape::terminal(&d.name),
                d.stats.gate_input_ms.count
            )?;
            for line in text_histogram(&d.histogram, d.stats.bar_ms, 40) {
                writeln!(w, "  {line}")?;
            }
            writeln!(w)?;
        }
        Ok(())
    }

    fn recommend_body(&self, report: &RecommendReport, w: &mut dyn Write) -> io::Result<()> {
        write_summary(
            &crate::summary::recommend_summary(report, &self.run),
            self.width,
            w,
        )?;
        let mut sections = vec![crate::sections::findings_section(&report.findings)];
        sections.extend(recommend_sections(report));
        write_sections(&sections, self.width, w)?;
        for d in &report.deployments {
            let Some(rec) = &d.paste else { continue };
            writeln!(
                w,
                "EPP plugin parameters to paste, {}:",
                escape::terminal(&d.name)
            )?;
            for line in rec.yaml.lines() {
                for part in yaml_line(&escape::terminal(line), self.width) {
                    writeln!(w, "{part}")?;
                }
            }
            writeln!(w)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section() -> Section {
        Section {
            title: "T".into(),
            headers: [
                "deployment",
                "decisions",
                "released",
                "pinned ≥5,000 ms",
                "p50 ms",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![
                [
                    "glm-5-2-very-long-name",
                    "1,030",
                    "2 (0.19%)",
                    "111 (10.8%)",
                    "121",
                ]
                .map(String::from)
                .to_vec(),
            ],
            notes: vec!["word ".repeat(40)],
        }
    }

    fn render(width: Option<u16>) -> String {
        let mut out = Vec::new();
        write_sections(&[section()], width, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_yaml_comment_wraps_as_comments_and_keys_stay_whole() {
        let long =
            "# why: current: no config replayed predicts a lower TTFT p90 than the config in force";
        let lines = yaml_line(long, Some(40));
        assert!(lines.len() > 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        assert!(lines[0].starts_with("  # why:"), "{lines:?}");
        assert!(
            lines[1..].iter().all(|l| l.starts_with("  #   ")),
            "{lines:?}"
        );
        let words = |t: &str| {
            t.split_whitespace()
                .filter(|w| *w != "#")
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(words(&lines.join(" ")), words(long));
        let key = "  maxTTFTPenaltyMs: 18000";
        assert_eq!(yaml_line(key.trim_start(), Some(10)), vec![key.to_string()]);
        assert_eq!(yaml_line(long, None), vec![format!("  {long}")]);
    }

    #[test]
    fn fits_the_width_without_splitting_words() {
        for width in [40u16, 50, 60, 80] {
            let text = render(Some(width));
            for line in text.lines() {
                assert!(chars(line) <= width as usize, "{width}: {line:?}\n{text}");
            }
            assert!(text.contains("glm-5-2-very-long-name"), "{text}");
            assert!(text.contains("≥5,000"), "{text}");
        }
        // A note's continuation lines hang under its first.
        let text = render(Some(60));
        let notes: Vec<&str> = text.lines().filter(|l| l.contains("word")).collect();
        assert!(notes.len() > 1, "{text}");
        assert!(notes[0].starts_with("  word"), "{text}");
        assert!(
            notes[1..].iter().all(|l| l.starts_with("    word")),
            "{text}"
        );
        // Narrow: the first column is repeated in each part.
        assert!(render(Some(40)).matches("glm-5-2-very-long-name").count() >= 2);
    }

    #[test]
    fn full_width_keeps_one_table_and_one_line_per_row() {
        let text = render(None);
        assert_eq!(text.matches("glm-5-2-very-long-name").count(), 1);
        let row = text.lines().find(|l| l.contains("glm-5-2")).unwrap();
        assert!(row.contains("111 (10.8%)"), "{text}");
        assert_eq!(text.lines().filter(|l| l.starts_with("  word")).count(), 1);
    }
}
