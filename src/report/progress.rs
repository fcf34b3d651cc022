//! Progress on the terminal: the library's [`Progress`] drawn as an indicatif bar (or a spinner
//! when the amount is a duration), hidden when the output is for a program.

use crate::progress::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::Write;
use std::sync::Mutex;

/// A progress bar on stderr for one phase at a time.
pub(crate) struct Bar {
    unit: &'static str,
    hidden: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl Bar {
    /// A bar counting `unit`s (`samples`, `images`, `iterations`); `hidden` draws nothing.
    pub fn new(unit: &'static str, hidden: bool) -> Bar {
        Bar {
            unit,
            hidden,
            bar: Mutex::new(None),
        }
    }

    fn with(&self, f: impl FnOnce(&ProgressBar)) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            f(bar);
        }
    }
}

impl Bar {
    /// Prints a line on stdout above the bar (the bar is redrawn below it); a failed write is
    /// returned, not a panic.
    pub fn println(&self, line: &str) -> std::io::Result<()> {
        let write = || {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}").and_then(|()| out.flush())
        };
        let guard = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(bar) if !bar.is_hidden() => bar.suspend(write),
            _ => write(),
        }
    }
}

impl Progress for Bar {
    fn start(&self, what: &str, total: Option<u64>) {
        let bar = match total {
            Some(n) => {
                let template = format!(
                    "{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {}  {{per_sec}}  {{msg}}  eta {{eta}}",
                    self.unit
                );
                let bar = ProgressBar::new(n);
                bar.set_style(
                    ProgressStyle::with_template(&template)
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> "),
                );
                bar
            }
            None => ProgressBar::new_spinner(),
        };
        if self.hidden {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        bar.set_prefix(what.to_string());
        bar.set_message(String::new());
        if total.is_none() {
            bar.set_message(what.to_string());
        }
        *self.bar.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar);
    }

    fn advance(&self, n: u64) {
        self.with(|b| b.inc(n));
    }

    fn status(&self, text: String) {
        self.with(|b| b.set_message(text));
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}
