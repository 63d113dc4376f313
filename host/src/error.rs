//! The one error type the command line reports, with the exit codes README.md lists.
//!
//! Every stage returns its failures as an [`Error`] whose message is written for the user:
//! it names the file (and line/column or tensor) and says what to do. Internal errors
//! (exit 1) are bugs in memplan itself.

use std::fmt;
use std::process::ExitCode;

/// What kind of failure, which decides the process exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A bug in memplan (exit 1).
    Internal,
    /// Bad command-line usage or a bad input file (exit 2).
    Input,
    /// The checker rejected the plan (exit 3).
    Rejected,
    /// A plugin was not found, failed to load, had the wrong ABI, panicked, crashed or timed
    /// out (exit 4).
    Plugin,
    /// The tensors do not fit the memory budgets (exit 5).
    DoesNotFit,
}

impl ErrorKind {
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Internal => 1,
            ErrorKind::Input => 2,
            ErrorKind::Rejected => 3,
            ErrorKind::Plugin => 4,
            ErrorKind::DoesNotFit => 5,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, message)
    }
    pub fn input(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Input, message)
    }
    pub fn rejected(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Rejected, message)
    }
    pub fn plugin(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Plugin, message)
    }
    pub fn does_not_fit(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::DoesNotFit, message)
    }

    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.kind.exit_code())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;
