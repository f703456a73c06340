//! Man pages and shell completions for polycc's installed binaries, from the clap command each
//! one parses, so they cannot drift from its `--help`.
//!
//! Each binary calls [`write_if_requested`] first thing in `main`. When the environment variable
//! [`ENV`] names a folder, the binary writes its pages and completions there, in the layout of
//! `$PREFIX/share`, and exits; otherwise nothing happens. (clap's own `CompleteEnv` hooks
//! dynamic completions into a binary the same way.) `make install` runs each binary so and copies
//! the folder into `share/`:
//!
//! ```text
//! man/man1/NAME.1                        one page per command, and one per subcommand (NAME-SUB.1)
//! bash-completion/completions/NAME
//! zsh/site-functions/_NAME
//! fish/vendor_completions.d/NAME.fish
//! ```

use clap::Command;
use clap_complete::Shell;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The environment variable naming the folder to write into.
pub const ENV: &str = "POLYCC_CLI_DOCS";

/// Where each shell looks for completions under `share/`, and the file name it expects.
const COMPLETIONS: [(Shell, &str, &str, &str); 3] = [
    (Shell::Bash, "bash-completion/completions", "", ""),
    (Shell::Zsh, "zsh/site-functions", "_", ""),
    (Shell::Fish, "fish/vendor_completions.d", "", ".fish"),
];

/// With [`ENV`] set to a folder: write `command`'s pages and completions there, list them on
/// stdout and return the exit code to end with. Without it (or with it empty): `None`, and the
/// binary goes on as usual.
pub fn write_if_requested(command: impl FnOnce() -> Command) -> Option<ExitCode> {
    let dir = std::env::var_os(ENV).filter(|d| !d.is_empty())?;
    let cmd = command();
    let name = cmd.get_name().to_owned();
    Some(match write_all(cmd, Path::new(&dir)) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: {ENV}={}: {e}", Path::new(&dir).display());
            ExitCode::FAILURE
        }
    })
}

/// Write `cmd`'s man pages (its own and one per visible subcommand) and its bash, zsh and fish
/// completions under `dir`, creating folders as needed; returns the files written.
pub fn write_all(cmd: Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    let name = cmd.get_name().to_owned();
    let man1 = dir.join("man/man1");
    std::fs::create_dir_all(&man1)?;
    let mut written = Vec::new();
    // As clap_mangen::generate_to, which does not say what it wrote: no `help` subcommand page,
    // and display names (`polycc-policy-add`) set by `build`.
    let mut for_pages = cmd.clone().disable_help_subcommand(true);
    for_pages.build();
    // Every page's footer names the binary and its version (a subcommand's has neither).
    let source = match cmd.get_version() {
        Some(v) => format!("{name} {v}"),
        None => name.clone(),
    };
    pages(&for_pages, &source, &man1, &mut written)?;

    let mut cmd = cmd;
    for (shell, folder, prefix, suffix) in COMPLETIONS {
        let folder = dir.join(folder);
        std::fs::create_dir_all(&folder)?;
        let path = folder.join(format!("{prefix}{name}{suffix}"));
        let mut file = io::BufWriter::new(std::fs::File::create(&path)?);
        clap_complete::generate(shell, &mut cmd, &name, &mut file);
        file.flush()?;
        written.push(path);
    }
    Ok(written)
}

/// `cmd`'s page and its visible subcommands', depth first.
fn pages(cmd: &Command, source: &str, man1: &Path, written: &mut Vec<PathBuf>) -> io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        pages(sub, source, man1, written)?;
    }
    written.push(clap_mangen::Man::new(cmd.clone()).source(source).generate_to(man1)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn tool() -> Command {
        Command::new("tool")
            .version("1.2.3")
            .about("A tool.")
            .arg(Arg::new("alg").long("alg").help("The algorithm."))
            .subcommand(Command::new("policy").about("Rules.").subcommand(
                Command::new("add").about("Add a rule.").arg(Arg::new("x").long("x").action(ArgAction::SetTrue)),
            ))
    }

    #[test]
    fn writes_a_page_per_command_and_subcommand_and_three_completions_in_shares_layout() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_all(tool(), dir.path()).unwrap();
        let rel: Vec<String> =
            files.iter().map(|f| f.strip_prefix(dir.path()).unwrap().display().to_string()).collect();
        assert_eq!(
            rel,
            [
                "man/man1/tool-policy-add.1",
                "man/man1/tool-policy.1",
                "man/man1/tool.1",
                "bash-completion/completions/tool",
                "zsh/site-functions/_tool",
                "fish/vendor_completions.d/tool.fish",
            ]
        );
        let page = std::fs::read_to_string(dir.path().join("man/man1/tool.1")).unwrap();
        assert!(page.contains("\\-\\-alg"), "{page}");
        assert!(page.contains(".TH tool 1  \"tool 1.2.3\""), "{page}");
        let sub = std::fs::read_to_string(dir.path().join("man/man1/tool-policy-add.1")).unwrap();
        assert!(sub.contains(".TH tool-policy-add 1  \"tool 1.2.3\""), "a subcommand's page names the binary: {sub}");
        let bash = std::fs::read_to_string(dir.path().join("bash-completion/completions/tool")).unwrap();
        assert!(bash.contains("policy"), "{bash}");
    }

    #[test]
    fn help_has_no_page_of_its_own_but_is_still_completed() {
        let dir = tempfile::tempdir().unwrap();
        write_all(tool(), dir.path()).unwrap();
        assert!(!dir.path().join("man/man1/tool-help.1").exists());
        let fish = std::fs::read_to_string(dir.path().join("fish/vendor_completions.d/tool.fish")).unwrap();
        assert!(fish.contains("-a \"help\""), "{fish}");
    }
}
