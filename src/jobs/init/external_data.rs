//! The external data files of a model taken into a workspace: checked where they are (inside
//! the model's folder, long enough), then copied beside the copy of the model, each under the
//! location the model names.

use crate::atomic_file::write_atomic_with;
use crate::onnx::external::{check_external_data, data_file_locations};
use crate::onnx::model::model_folder;
use crate::onnx::pb::GraphProto;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Checks the external data of the model at `model` (its `graph`) and, unless `link` (a linked
/// model reads its data beside the file it links to), copies each data file into `dest_dir`;
/// a different file already there under that name is replaced only with `force`. Returns the
/// locations the model names, each once.
pub(crate) fn take_external_data(
    model: &Path,
    graph: &GraphProto,
    (dest_dir, link, force): (PathBuf, bool, bool),
) -> Result<Vec<String>> {
    let shown = model.display();
    let from = model_folder(model);
    check_external_data(graph, &from).with_context(|| shown.to_string())?;
    let locations = data_file_locations(graph).with_context(|| shown.to_string())?;
    if link {
        return Ok(locations);
    }
    for location in &locations {
        let src = from.join(location);
        let dest = dest_dir.join(location);
        if same_file(&src, &dest) {
            continue;
        }
        if dest.exists() && !force {
            bail!(
                "{}: another file of that name is already in the workspace (external data of {shown}); --force replaces it",
                dest.display()
            );
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("{}: cannot create", parent.display()))?;
        }
        write_atomic_with(&dest, |w| {
            let mut file = std::fs::File::open(&src)
                .with_context(|| format!("{}: cannot open", src.display()))?;
            std::io::copy(&mut file, w)
                .with_context(|| format!("{}: cannot copy to {}", src.display(), dest.display()))?;
            Ok(())
        })?;
    }
    Ok(locations)
}

/// Whether `a` and `b` are the same file (both exist and resolve to one path).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
