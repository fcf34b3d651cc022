//! Standard output as a write that can fail: a full disk or a closed pipe under a command is an
//! error with its cause (one line on stderr, exit 1), never a panic. Everything a command prints
//! on stdout goes through here.

use anyhow::{anyhow, Error, Result};
use std::cell::RefCell;
use std::io::Write;

/// The error of a write to standard output that failed with `e`.
pub fn failed(e: std::io::Error) -> Error {
    anyhow!("cannot write to standard output: {e}")
}

/// Writes `text` to standard output and flushes it.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(failed)
}

/// Writes `line` and a newline to standard output.
pub fn println(line: &str) -> Result<()> {
    print(&format!("{line}\n"))
}

/// The first failed write of lines printed where an error cannot be returned (a job's callback),
/// kept to be returned once the job is done.
#[derive(Default)]
pub(crate) struct FirstFailure(RefCell<Option<Error>>);

impl FirstFailure {
    /// Keeps the error of `outcome` if it is the first.
    pub fn keep(&self, outcome: Result<()>) {
        if let Err(e) = outcome {
            self.0.borrow_mut().get_or_insert(e);
        }
    }

    /// The first error kept, if any.
    pub fn check(self) -> Result<()> {
        match self.0.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
