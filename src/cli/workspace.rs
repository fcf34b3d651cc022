//! Which workspace a command runs in: the one found from the current folder, required when the
//! model is left out (its absence is a usage error that says what was looked for), and applied
//! to a model named on the command line only when that model lies inside it.

use crate::data::preprocess::PreprocessRequest;
use crate::error::{hint_of, Hint, Setting};
use crate::workspace::{self, Workspace};
use anyhow::Result;
use std::path::Path;

/// The workspace of the current folder, which must exist.
pub(crate) fn required() -> Result<Workspace> {
    let here = std::env::current_dir()?;
    workspace::find(&here)
}

/// The workspace for a command given `model` (or none): [`required`] without a model; with one,
/// the current folder's workspace when the model lies inside it.
pub(crate) fn for_model(model: Option<&Path>) -> Result<Option<Workspace>> {
    match model {
        None => required().map(Some),
        Some(m) => Ok(workspace::current()?.filter(|ws| ws.contains(m))),
    }
}

/// `err` naming the `trtkit.toml` and its `[preprocess]` keys when the preprocessing it rejects
/// took values from the file (`given` holds the flags'), instead of reading as a flag mistake.
pub(crate) fn blame_preprocess_file(
    err: anyhow::Error,
    ws: Option<&Workspace>,
    given: &PreprocessRequest,
) -> anyhow::Error {
    let (Some(ws), Some(file)) = (ws, ws.and_then(|w| w.file.as_ref())) else {
        return err;
    };
    let keys = ws.preprocess_keys_from_file(given);
    if keys.is_empty() || hint_of(&err) != Some(&Hint::Wrong(Setting::Preprocess)) {
        return err;
    }
    anyhow::anyhow!(
        "{err:#} (set by [preprocess] {} in {})",
        keys.join(", "),
        file.display()
    )
}
