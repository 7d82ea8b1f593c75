//! One escaping helper per output format, for text that comes from the
//! logs (deployment names, namespaces, pods, request ids, plugin names,
//! file names in notes) and so may hold anything: each makes the text
//! plain text for that format's reader, so that it can neither inject
//! markup nor control a terminal. The renderers apply them where text
//! enters their output (every cell, title and note), so a section never
//! needs to know which of its strings came from a log.
//!
//! | format | helper | what it does |
//! |---|---|---|
//! | terminal table | [`terminal`] | drops control characters (ESC, BEL, C1, …) and bidirectional overrides |
//! | Markdown | [`markdown`] | line breaks and controls become spaces; `< > &` become entities; `` \ ` | `` and the `(` of `](` are backslash-escaped |
//! | Markdown code span | [`markdown_code`] | backticks become `'`, `\|` escaped, controls become spaces |
//! | Markdown code block | [`markdown_fence`] | a fence longer than any backtick run of the block |
//! | SVG (XML) | [`xml`] | drops the characters XML 1.0 forbids; `& < > " '` become entities |
//! | CSV | [`csv`] | a cell starting with `= + - @`, tab or CR that is not a number gets a leading `'` (spreadsheet formula injection); RFC 4180 quoting |

use std::borrow::Cow;

/// A bidirectional-text control (U+202A–U+202E, U+2066–U+2069, U+200E,
/// U+200F, U+061C): it reorders what a reader sees.
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// Text for a terminal: line breaks and tabs become a space, other
/// control characters (C0, DEL, C1) and bidirectional controls are
/// dropped, so log text can neither move the cursor, set colours, ring the
/// bell or retitle the window, nor fake a line of the report or reorder
/// one.
pub fn terminal(s: &str) -> Cow<'_, str> {
    let bad = |c: char| c.is_control() || is_bidi(c);
    if !s.chars().any(bad) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .filter_map(|c| match c {
                '\n' | '\r' | '\t' => Some(' '),
                c if bad(c) => None,
                c => Some(c),
            })
            .collect(),
    )
}

/// Text for Markdown (a table cell, a heading, a list item): plain text
/// whatever it holds. Line breaks, tabs and other controls become a space
/// (a newline cannot start a heading or end a table row); `<`, `>` and `&`
/// become entities (no HTML passes); `\`, `` ` `` and `|` are
/// backslash-escaped (no code span, no cell break), and so is the `(` of
/// `](` (no link or image). Emphasis characters are left as they are: at
/// worst they change a name's weight.
pub fn markdown(s: &str) -> Cow<'_, str> {
    let special =
        |c: char| c.is_control() || is_bidi(c) || matches!(c, '<' | '>' | '&' | '\\' | '`' | '|');
    if !s.chars().any(special) && !s.contains("](") {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut prev = ' ';
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '|' => {
                out.push('\\');
                out.push(c);
            }
            '(' if prev == ']' => out.push_str("\\("),
            c if c.is_control() || is_bidi(c) => out.push(' '),
            c => out.push(c),
        }
        prev = c;
    }
    Cow::Owned(out)
}

/// Text for a Markdown code span (`` `…` ``) in a table: a code span shows
/// entities and backslashes as they are, so only what would end it, the
/// row or the line is changed: a backtick becomes `'`, `|` is escaped (the
/// table splits cells before code spans), controls become spaces.
pub fn markdown_code(s: &str) -> Cow<'_, str> {
    if !s
        .chars()
        .any(|c| c.is_control() || is_bidi(c) || c == '`' || c == '|')
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        match c {
            '`' => out.push('\''),
            '|' => out.push_str("\\|"),
            c if c.is_control() || is_bidi(c) => out.push(' '),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The fence for a Markdown code block holding `body`: three backticks,
/// or one more than the longest run of backticks in it, so that no line
/// of the body closes the block.
pub fn markdown_fence(body: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// Whether XML 1.0 allows the character (`Char` production).
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Text for XML (SVG) content or attribute values: characters XML 1.0
/// forbids (C0 controls but tab and line breaks, U+FFFE, U+FFFF) are
/// dropped, and `& < > " '` become entities, so the document stays
/// well-formed.
pub fn xml(s: &str) -> Cow<'_, str> {
    let special = |c: char| !xml_char(c) || matches!(c, '&' | '<' | '>' | '"' | '\'');
    if !s.chars().any(special) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if !xml_char(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// One CSV field: a text that a spreadsheet would run as a formula (it
/// starts with `=`, `+`, `-`, `@`, a tab or a carriage return, and is not
/// a number) gets a leading `'`; then RFC 4180 quoting when it holds a
/// comma, a quote or a line break. Numbers, negative ones included, are
/// written as they are.
pub fn csv(s: &str) -> Cow<'_, str> {
    let formula = s.starts_with(['=', '+', '-', '@', '\t', '\r']) && s.parse::<f64>().is_err();
    let guarded: Cow<'_, str> = if formula {
        Cow::Owned(format!("'{s}"))
    } else {
        Cow::Borrowed(s)
    };
    if guarded.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", guarded.replace('"', "\"\"")))
    } else {
        guarded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &[&str] = &[
        "ns\n## injected",
        "<img src=x onerror=alert(1)>",
        "\x1b[31mred\x1b[0m",
        "bell\x07",
        "nul\x00x\x01\x08\x0b\x0c\x1f\x7f\u{9b}",
        "=HYPERLINK(\"http://x\",\"y\")",
        "a|b",
        "`code` ```fence",
        "rtl\u{202E}txt.exe",
        "\u{FFFE}\u{FFFF}",
    ];

    #[test]
    fn terminal_keeps_no_control() {
        for h in HOSTILE {
            let t = terminal(h);
            assert!(!t.chars().any(|c| c.is_control() || is_bidi(c)), "{t:?}");
        }
        assert_eq!(terminal("\x1b[31mred\x1b[0m"), "[31mred[0m");
        assert_eq!(terminal("a\nb\x07"), "a b");
        assert_eq!(terminal("plain, ünïcode"), "plain, ünïcode");
        assert!(matches!(terminal("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn markdown_is_plain_text() {
        for h in HOSTILE {
            let m = markdown(h);
            assert!(
                !m.contains('\n') && !m.contains('<') && !m.contains('>'),
                "{m:?}"
            );
            assert!(!m.chars().any(|c| c.is_control()), "{m:?}");
            // Every `|` and backtick is escaped.
            let b = m.as_bytes();
            for (i, &c) in b.iter().enumerate() {
                if c == b'|' || c == b'`' {
                    assert!(i > 0 && b[i - 1] == b'\\', "{m:?}");
                }
            }
        }
        assert_eq!(markdown("ns\n## x"), "ns ## x");
        assert_eq!(markdown("<img onerror=a>"), "&lt;img onerror=a&gt;");
        assert_eq!(markdown("[x](http://e)"), "[x]\\(http://e)");
        assert_eq!(markdown("a\\|b"), "a\\\\\\|b");
        assert_eq!(markdown("glm-5-2 (n = 3) [log]"), "glm-5-2 (n = 3) [log]");
        assert_eq!(markdown_code("a`b|c\nd"), "a'b\\|c d");
        assert_eq!(markdown_fence("a\n```\nb"), "````");
        assert_eq!(markdown_fence("plain"), "```");
    }

    #[test]
    fn xml_is_well_formed_text() {
        for h in HOSTILE {
            let x = xml(h);
            assert!(x.chars().all(xml_char), "{x:?}");
            assert!(
                !x.contains('<') && !x.contains('>') && !x.contains('"'),
                "{x:?}"
            );
        }
        assert_eq!(xml("a<b & \"c\"\x00"), "a&lt;b &amp; &quot;c&quot;");
    }

    #[test]
    fn csv_guards_formulas_not_numbers() {
        assert_eq!(csv("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv("+cmd"), "'+cmd");
        assert_eq!(csv("-2+3"), "'-2+3");
        assert_eq!(csv("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv("\tx"), "'\tx");
        assert_eq!(csv("\rx"), "\"'\rx\"");
        assert_eq!(csv("-12.5"), "-12.5");
        assert_eq!(csv("1e-3"), "1e-3");
        assert_eq!(csv("a,b"), "\"a,b\"");
        assert_eq!(csv("plain"), "plain");
    }
}
