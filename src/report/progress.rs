//! Progress on the terminal: the library's progress traits implemented with indicatif bars,
//! hidden when the output is for a program. [`Bar`] is the generic one ([`Progress`]: a bar,
//! or a spinner when the amount is a duration); [`CalibrationBar`] counts calibration batches
//! ([`BatchProgress`]); [`BuildBar`] follows TensorRT's builder phases ([`BuildProgress`]).

use crate::calibration::job::BatchProgress;
use crate::progress::Progress;
use crate::trt::engine_builder::BuildProgress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::Mutex;

/// A progress bar on stderr for one phase at a time.
pub struct Bar {
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
    /// Prints a line on stdout above the bar (the bar is redrawn below it).
    pub fn println(&self, line: &str) {
        let guard = self.bar.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(bar) if !bar.is_hidden() => bar.suspend(|| println!("{line}")),
            _ => println!("{line}"),
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

/// A bar on stderr with `template`, of unknown length until a phase starts; `hidden` draws
/// nothing.
fn styled_bar(template: &str, hidden: bool) -> ProgressBar {
    let bar = ProgressBar::new(0);
    if hidden {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// The bar shown while calibrating: batches done, rate, elapsed (hidden with `--json`).
pub struct CalibrationBar(ProgressBar);

impl CalibrationBar {
    /// A bar drawn on stderr, or a hidden one.
    pub fn new(hidden: bool) -> Self {
        CalibrationBar(styled_bar(
            "calibrating {bar:30} {pos}/{len} batches {elapsed} ({per_sec})",
            hidden,
        ))
    }
}

impl BatchProgress for CalibrationBar {
    fn start(&self, batches: usize) {
        self.0.set_length(batches as u64);
        self.0.reset();
    }
    fn advance(&self) {
        self.0.inc(1);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// TensorRT's builder phases on a bar: the outermost phase's steps, the innermost's name.
pub struct BuildBar(ProgressBar);

impl BuildBar {
    /// A bar drawn on stderr, or a hidden one.
    pub fn new(hidden: bool) -> Self {
        BuildBar(styled_bar(
            "building {bar:30} {pos}/{len} {elapsed} {msg}",
            hidden,
        ))
    }

    /// Clears the bar (also when the build failed before its last phase ended).
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl BuildProgress for BuildBar {
    fn phase_start(&self, name: &str, depth: usize, steps: i32) {
        if depth == 0 {
            self.0.set_length(steps.max(0) as u64);
            self.0.set_position(0);
        }
        self.0.set_message(name.to_string());
    }
    fn step(&self, name: &str, depth: usize, step: i32) {
        if depth == 0 {
            self.0.set_position(step.max(0) as u64 + 1);
        }
        self.0.set_message(name.to_string());
    }
    fn phase_finish(&self, _: &str, depth: usize) {
        if depth == 0 {
            self.0.finish_and_clear();
        }
    }
}
