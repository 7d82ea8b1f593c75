//! The paste block of the terminal report: the YAML to paste into the EPP
//! config, its `#` comment lines wrapped to the table width.

/// `yaml`'s lines, each `#` comment line longer than `width` characters
/// wrapped at spaces: its first line keeps the comment's indentation and
/// `# `, every continuation line starts with the same indentation and
/// `#   `. Other lines (the YAML keys) are as given; a word longer than
/// the room is not split. `None`: no limit.
pub fn wrap_comments(yaml: &str, width: Option<usize>) -> Vec<String> {
    let mut out = Vec::new();
    for line in yaml.lines() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let Some(text) = body.strip_prefix('#') else {
            out.push(line.to_string());
            continue;
        };
        let Some(width) = width.filter(|&w| line.chars().count() > w) else {
            out.push(line.to_string());
            continue;
        };
        let first = format!("{indent}# ");
        let next = format!("{indent}#   ");
        let mut cur = first.clone();
        let mut empty = true;
        for word in text.split_whitespace() {
            let n = word.chars().count();
            if !empty && cur.chars().count() + 1 + n > width {
                out.push(std::mem::replace(&mut cur, next.clone()));
                empty = true;
            }
            if !empty {
                cur.push(' ');
            }
            cur.push_str(word);
            empty = false;
        }
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "# glm-5-2: set on your prefix-cache-affinity-filter entry (its name and other parameters unchanged), or write your config back with --emit-config\nparameters:\n  maxTTFTPenaltyMs: 18000\n# alternative, not recommended (static):\n#  penaltyMode: static\n";

    #[test]
    fn long_comments_wrap_and_keys_stay() {
        let lines = wrap_comments(YAML, Some(60));
        for l in &lines {
            assert!(l.chars().count() <= 60, "{l:?}");
        }
        assert_eq!(
            lines[0],
            "# glm-5-2: set on your prefix-cache-affinity-filter entry"
        );
        assert!(lines[1].starts_with("#   (its name"), "{lines:#?}");
        let words = |t: &str| {
            t.lines()
                .flat_map(|l| l.trim_start_matches([' ', '#']).split_whitespace())
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(words(&lines.join("\n")), words(YAML));
        // The YAML keys, and short comments, as given.
        let tail = &lines[lines.len() - 4..];
        assert_eq!(
            tail,
            [
                "parameters:",
                "  maxTTFTPenaltyMs: 18000",
                "# alternative, not recommended (static):",
                "#  penaltyMode: static"
            ]
        );
        assert_eq!(wrap_comments(YAML, None), YAML.lines().collect::<Vec<_>>());
    }
}
