//! What memplan prints on stdout, in one place: the plan summary (`memplan plan`), the check
//! report (`memplan check`) and the bench tables (`memplan bench`), each as text and JSON
//! (and CSV for bench). Reports read the results of the stages; they compute nothing new.

pub mod bench;
pub mod check;
pub mod external;
mod order;
pub mod plan;

use std::io::{self, Write};

use crate::error::{Error, Result};

/// What writing `what` to stdout came to. A reader that closed stdout early
/// (`memplan planners | head -1`) is not a failure of memplan's: the rest is dropped quietly
/// and the run ends with the exit code its work earned (files written, plan checked), as cargo
/// and ripgrep do; any other write error is reported.
pub fn stdout_written(result: io::Result<()>, what: &str) -> Result<()> {
    match result {
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(Error::internal(format!(
            "cannot write {what} to stdout: {error}"
        ))),
        Ok(()) => Ok(()),
    }
}

/// Writes `text` to stdout and flushes it ([`stdout_written`] says what an error comes to).
pub fn print(text: &str, what: &str) -> Result<()> {
    let mut stdout = io::stdout().lock();
    stdout_written(
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush()),
        what,
    )
}
