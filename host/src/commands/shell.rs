//! `memplan completions SHELL` and `memplan man`: shell completions and the man page,
//! generated from the clap definitions the command line is parsed with ([`crate::cli::Cli`]),
//! so that they list exactly the subcommands and options memplan accepts.

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::{Error, Result};

/// Writes the completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "memplan", &mut script);
    write_stdout(&script, "the completion script")
}

/// Writes the man page (roff) on stdout.
pub fn man() -> Result<ExitCode> {
    write_stdout(&man_page()?, "the man page")
}

/// memplan's man page: the top-level command, then a section per subcommand (its options and
/// help), so that one page documents the whole command line.
pub fn man_page() -> Result<Vec<u8>> {
    let command = Cli::command();
    let mut page = Vec::new();
    let failed =
        |error: std::io::Error| Error::internal(format!("cannot render the man page: {error}"));
    clap_mangen::Man::new(command.clone())
        .render(&mut page)
        .map_err(failed)?;
    for subcommand in command.get_subcommands() {
        let name = format!("memplan {}", subcommand.get_name());
        let man = clap_mangen::Man::new(subcommand.clone().bin_name(name));
        let mut sections = Vec::new();
        man.render_synopsis_section(&mut sections)
            .and_then(|()| man.render_description_section(&mut sections))
            .and_then(|()| man.render_options_section(&mut sections))
            .map_err(failed)?;
        // One section per subcommand; its synopsis, description and options are subsections.
        writeln!(
            page,
            ".SH \"MEMPLAN {}\"",
            subcommand.get_name().to_uppercase()
        )
        .map_err(failed)?;
        let sections = String::from_utf8_lossy(&sections).replace("\n.SH ", "\n.SS ");
        let sections = sections
            .strip_prefix(".SH ")
            .map_or(sections.clone(), |rest| format!(".SS {rest}"));
        page.extend_from_slice(sections.as_bytes());
    }
    Ok(page)
}

/// Writes `bytes` on stdout; a closed stdout (`| head`) ends quietly.
fn write_stdout(bytes: &[u8], what: &str) -> Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(error) => Err(Error::internal(format!(
            "cannot write {what} to stdout: {error}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_man_page_documents_every_subcommand_and_its_options() {
        let page = String::from_utf8(man_page().unwrap()).unwrap();
        assert!(page.starts_with(".ie \\n(.g .ds Aq"), "{}", &page[..80]);
        for subcommand in ["PLAN", "PLANNERS", "CHECK", "BENCH", "COMPLETIONS"] {
            assert!(
                page.contains(&format!(".SH \"MEMPLAN {subcommand}\"")),
                "no section for {subcommand}"
            );
        }
        // Options are written with roff escapes for the dashes.
        for option in ["plugin\\-dir", "emit\\-tflite", "planner\\-options"] {
            assert!(page.contains(option), "{option} is not in the man page");
        }
    }
}
