//! What `init` says: the workspace it made, and (`--show`) the settings that apply with where
//! each came from.

use crate::jobs::init::{Effective, InitReport, Source};

/// The lines `init` prints.
pub(crate) fn render_init(r: &InitReport) -> String {
    let how = if r.linked { "linked" } else { "copied" };
    let data = match r.external_data.len() {
        0 => String::new(),
        _ if r.linked => format!(
            " (its external data stays beside the file it links to: {})",
            r.external_data.join(", ")
        ),
        _ => format!(" with its external data ({})", r.external_data.join(", ")),
    };
    format!(
        "made a trtkit workspace in {}: {how} the model to {}{data}, created engines/ and calibration/, wrote {}\nthen, from there: trtkit build --fp16 …, trtkit validate --dataset DIR, trtkit compare\n",
        r.root, r.model, r.file
    )
}

/// The effective settings, one per line, with their source.
pub(crate) fn render_effective(settings: &[Effective]) -> String {
    let width = settings.iter().map(|e| e.name.len()).max().unwrap_or(0);
    settings
        .iter()
        .map(|e| {
            let from = match e.source {
                Source::CommandLine => "command line",
                Source::Workspace => "trtkit.toml",
                Source::OnlyModel => "the only model in onnx/",
                Source::Default => "default (follows the model)",
            };
            format!("{:<width$}  {:<24}  {from}\n", e.name, e.value)
        })
        .collect()
}
