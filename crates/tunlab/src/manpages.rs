//! The man pages and shell completions the Debian package installs, made
//! from the command line's own definitions (clap_mangen, clap_complete),
//! so that they say what `--help` says.

use clap::CommandFactory;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `tunlab manpages DIR`: write them, and list what was written.
pub fn run(dir: &Path) -> ExitCode {
    match write(dir) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tunlab manpages: {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}

/// Write `tunlab.1`, one `tunlab-COMMAND.1` per visible subcommand, and
/// the bash, zsh and fish completions into `dir`; the files written.
pub fn write(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = crate::Cli::command();
    cmd.build();
    let mut written = Vec::new();
    let mut page = |cmd: clap::Command, name: String| -> std::io::Result<()> {
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut buf)?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, buf)?;
        written.push(path);
        Ok(())
    };
    page(cmd.clone(), "tunlab".into())?;
    // After build(), each subcommand's display name is `tunlab-NAME`,
    // which clap_mangen titles its page with.
    let pages = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help");
    for sub in pages {
        page(sub.clone(), format!("tunlab-{}", sub.get_name()))?;
    }
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        written.push(clap_complete::generate_to(shell, &mut cmd, "tunlab", dir)?);
    }
    Ok(written)
}
