//! The lines under a table, and the binaries' warnings: each about the
//! whole report or about one deployment. The same text about several
//! deployments is said once, naming them all
//! (`warning: alpha, beta, gamma: no recommendation: …`), where the first
//! of them said it; a deployment's own text (its own numbers) keeps its own
//! line. The human formats (terminal table, Markdown) and the binaries'
//! standard error go through [`collapse`]; JSON and CSV keep every
//! deployment's fields as they are.

/// How a line reads: a note, or a warning (`warning: ` first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// A note.
    Note,
    /// A warning.
    Warning,
}

/// One note or warning, before the deployments saying the same are
/// gathered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Note or warning.
    pub level: Level,
    /// The deployment it is about; `None`: the whole report.
    pub deployment: Option<String>,
    /// What it says, without the deployment's name.
    pub text: String,
}

impl Note {
    /// A note about the whole report (never gathered with another).
    pub fn general(text: impl Into<String>) -> Note {
        Note {
            level: Level::Note,
            deployment: None,
            text: text.into(),
        }
    }

    /// A note about one deployment.
    pub fn about(deployment: &str, text: impl Into<String>) -> Note {
        Note {
            level: Level::Note,
            deployment: Some(deployment.to_string()),
            text: text.into(),
        }
    }

    /// A warning about one deployment.
    pub fn warning(deployment: &str, text: impl Into<String>) -> Note {
        Note {
            level: Level::Warning,
            deployment: Some(deployment.to_string()),
            text: text.into(),
        }
    }

    /// Whether it is a warning.
    pub fn is_warning(&self) -> bool {
        self.level == Level::Warning
    }
}

/// A note or warning and every deployment it is about, in the order they
/// first said it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collapsed<'a> {
    /// Note or warning.
    pub level: Level,
    /// The deployments; empty: the whole report.
    pub deployments: Vec<&'a str>,
    /// What it says.
    pub text: &'a str,
}

impl Collapsed<'_> {
    /// `alpha, beta: text` (or `text` about the whole report), without the
    /// level: what the binaries print after `warning: `.
    pub fn body(&self) -> String {
        if self.deployments.is_empty() {
            self.text.to_string()
        } else {
            format!("{}: {}", self.deployments.join(", "), self.text)
        }
    }

    /// The line under a table: [`Collapsed::body`], `warning: ` first for
    /// a warning.
    pub fn line(&self) -> String {
        match self.level {
            Level::Note => self.body(),
            Level::Warning => format!("warning: {}", self.body()),
        }
    }
}

/// The notes with each text said once: the notes of the same level and
/// text about deployments become one naming them all (each once, in the
/// order they first said it), at the place of the first; notes about the
/// whole report stay as they are, where they are.
pub fn collapse(notes: &[Note]) -> Vec<Collapsed<'_>> {
    let mut out: Vec<Collapsed<'_>> = Vec::with_capacity(notes.len());
    // Where each (level, text) about deployments is in `out`.
    let mut at: std::collections::HashMap<(Level, &str), usize> = Default::default();
    for n in notes {
        let Some(d) = n.deployment.as_deref() else {
            out.push(Collapsed {
                level: n.level,
                deployments: Vec::new(),
                text: &n.text,
            });
            continue;
        };
        match at.get(&(n.level, n.text.as_str())) {
            Some(&i) => {
                let names = &mut out[i].deployments;
                if !names.contains(&d) {
                    names.push(d);
                }
            }
            None => {
                at.insert((n.level, &n.text), out.len());
                out.push(Collapsed {
                    level: n.level,
                    deployments: vec![d],
                    text: &n.text,
                });
            }
        }
    }
    out
}

/// The lines of [`collapse`]: what a section prints under its table.
pub fn lines(notes: &[Note]) -> Vec<String> {
    collapse(notes).iter().map(Collapsed::line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_is_said_once_naming_every_deployment_in_order() {
        let notes = vec![
            Note::general("Shares are of all decisions."),
            Note::warning("gamma", "no matched tokens"),
            Note::about("gamma", "no matched tokens"),
            Note::warning("gamma", "peak 4.8x the estimate"),
            Note::warning("alpha", "no matched tokens"),
            Note::warning("delta", "peak 21.6x the estimate"),
            Note::warning("beta", "no matched tokens"),
            Note::warning("alpha", "no matched tokens"),
            Note::general("Shares are of all decisions."),
        ];
        assert_eq!(
            lines(&notes),
            [
                "Shares are of all decisions.",
                "warning: gamma, alpha, beta: no matched tokens",
                // A note and a warning with the same text stay apart.
                "gamma: no matched tokens",
                "warning: gamma: peak 4.8x the estimate",
                "warning: delta: peak 21.6x the estimate",
                "Shares are of all decisions.",
            ]
        );
        let c = collapse(&notes);
        assert_eq!(c[1].body(), "gamma, alpha, beta: no matched tokens");
        assert_eq!(c[1].level, Level::Warning);
    }

    #[test]
    fn one_deployment_reads_as_before() {
        assert_eq!(
            lines(&[Note::warning("a", "x"), Note::about("b", "y")]),
            ["warning: a: x", "b: y"]
        );
        assert!(lines(&[]).is_empty());
    }
}
