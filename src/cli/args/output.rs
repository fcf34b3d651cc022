//! How a command prints its report: the terminal tables by default, JSON for scripts, markdown
//! for pasting into a document. Declared once here for every command.

use crate::report::format::json;
use anyhow::Result;
use clap::Args;
use serde::Serialize;

/// `--json`, for commands whose report is not a table.
#[derive(Clone, Copy, Debug, Default, Args)]
pub struct JsonArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--json` or `--markdown`, for commands whose report is tables.
#[derive(Clone, Copy, Debug, Default, Args)]
pub struct OutputArgs {
    /// Print the report as JSON.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print the tables as markdown.
    #[arg(long)]
    pub markdown: bool,
}

impl OutputArgs {
    /// Whether the output is for a program or a document: no progress bars or notes then.
    pub fn quiet(&self) -> bool {
        self.json || self.markdown
    }

    /// Prints `report` as JSON, or `render(markdown)` otherwise.
    pub fn print<T: Serialize>(
        &self,
        report: &T,
        render: impl FnOnce(bool) -> String,
    ) -> Result<()> {
        print_report(self.json, report, || render(self.markdown))
    }
}

impl JsonArgs {
    /// Prints `report` as JSON, or `render()` otherwise.
    pub fn print<T: Serialize>(&self, report: &T, render: impl FnOnce() -> String) -> Result<()> {
        print_report(self.json, report, render)
    }
}

/// Prints `report` as JSON when `as_json`, otherwise the text `render` makes: how every command
/// prints its report.
fn print_report<T: Serialize>(
    as_json: bool,
    report: &T,
    render: impl FnOnce() -> String,
) -> Result<()> {
    let text = if as_json { json(report)? } else { render() };
    crate::cli::stdout::print(&text)
}
