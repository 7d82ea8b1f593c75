//! What `--follow` refuses, the same for both binaries: the flags that
//! write elsewhere than stdout, `--since`/`--until`, a too short
//! `--every`, and report formats other than a table or JSON lines.

use anyhow::{bail, ensure};
use gatecal_render::Format;

/// Refuses, in order, the first flag of `refused` (`(given, flag)`) that
/// was given, then `--since`/`--until` (`since_until`: either given), then
/// an `--every` under 0.1 s. `bin` names the binary in the advice for
/// `--kubectl`.
pub fn check(
    bin: &str,
    refused: &[(bool, &str)],
    since_until: bool,
    every: f64,
) -> anyhow::Result<()> {
    for &(given, flag) in refused {
        if given {
            let advice = if flag == "--kubectl" {
                format!(
                    " (pipe `kubectl logs -f ... --prefix --timestamps` into `{bin} --follow -`)"
                )
            } else {
                String::new()
            };
            bail!("{flag} does not go with --follow, whose reports go to stdout{advice}");
        }
    }
    ensure!(
        !since_until,
        "--since/--until do not go with --follow: each report covers the last --window of log time"
    );
    ensure!(every >= 0.1, "--every {every}: give at least 0.1s");
    Ok(())
}

/// The format of `--follow`'s reports: a table or JSON lines, else an
/// error saying so.
pub fn format(format: Format) -> anyhow::Result<Format> {
    if matches!(format, Format::Markdown | Format::Csv) {
        bail!("--follow prints a table or JSON lines: give --format table or --format json");
    }
    Ok(format)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_flag_given_is_refused_with_its_advice() {
        let e = check(
            "gate-dist",
            &[(false, "-o"), (true, "--kubectl"), (true, "--svg")],
            false,
            1.0,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("--kubectl does not go with --follow"), "{e}");
        assert!(e.contains("into `gate-dist --follow -`"), "{e}");
        let e = check("recommend", &[(true, "-o")], true, 0.0)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "-o does not go with --follow, whose reports go to stdout"
        );
        let e = check("recommend", &[], true, 0.0).unwrap_err().to_string();
        assert!(e.starts_with("--since/--until"), "{e}");
        let e = check("recommend", &[], false, 0.05)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "--every 0.05: give at least 0.1s");
        assert!(check("recommend", &[(false, "-o")], false, 0.1).is_ok());
        assert!(format(Format::Csv).is_err() && format(Format::Json).is_ok());
    }
}
