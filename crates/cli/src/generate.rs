//! `--generate`: shell completions and a man page, from the binary's own
//! flags (as ripgrep's `--generate`).

use std::io::{self, Write};

use clap::CommandFactory;
use clap_complete::Shell;

/// What `--generate` writes to stdout.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generate {
    /// A bash completion script.
    CompleteBash,
    /// A zsh completion script.
    CompleteZsh,
    /// A fish completion script.
    CompleteFish,
    /// A man page (roff).
    Man,
}

/// Writes what `kind` asks for, for the binary whose flags are `A`.
pub fn generate<A: CommandFactory>(kind: Generate, w: &mut dyn Write) -> io::Result<()> {
    let mut cmd = A::command();
    let name = cmd.get_name().to_string();
    let shell = match kind {
        Generate::CompleteBash => Shell::Bash,
        Generate::CompleteZsh => Shell::Zsh,
        Generate::CompleteFish => Shell::Fish,
        Generate::Man => {
            cmd.build();
            return clap_mangen::Man::new(cmd).render(w);
        }
    };
    // clap_complete panics on a write error (a closed pipe): write to
    // memory first.
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut buf);
    w.write_all(&buf)
}

/// Writes what `kind` asks for to stdout (a closed pipe is not an error).
pub fn to_stdout<A: CommandFactory>(kind: Generate) -> anyhow::Result<()> {
    crate::output::write_output(None, |w| generate::<A>(kind, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    #[command(name = "demo", version, about = "A demo.")]
    struct Demo {
        /// Threads.
        #[arg(long)]
        threads: Option<usize>,
    }

    fn text(kind: Generate) -> String {
        let mut out = Vec::new();
        generate::<Demo>(kind, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_kind_names_the_flags() {
        assert!(text(Generate::CompleteBash).contains("--threads"));
        assert!(text(Generate::CompleteZsh).contains("#compdef demo"));
        assert!(text(Generate::CompleteFish).contains("complete -c demo -l threads"));
        let man = text(Generate::Man);
        assert!(man.contains(".TH demo 1"), "{man}");
        assert!(man.contains("threads"));
    }
}
