//! The trtkit workspace: a project folder with `trtkit.toml`, found in the current folder or a
//! parent (as cargo finds `Cargo.toml`), or one whose `onnx/` holds exactly one model. It names
//! the model and keeps the settings users would otherwise retype (input shape, dataset,
//! calibration data, preprocessing); a flag on the command line always wins over the file.
//! `trtkit init` makes one (the job is `jobs::init`).

use crate::data::dataset::Annotations;
use crate::data::preprocess::PreprocessRequest;
use crate::error::{kind_of, ErrorKind, Hint, TypedError};
use crate::onnx::shape::parse_shape_tokens;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The settings file of a workspace.
pub(crate) const FILE: &str = "trtkit.toml";
/// Where a workspace keeps its model.
pub(crate) const ONNX_DIR: &str = "onnx";
/// Where a workspace's engines go.
pub(crate) const ENGINES_DIR: &str = "engines";
/// Where a workspace's calibration caches go.
pub(crate) const CALIBRATION_DIR: &str = "calibration";

/// What `trtkit.toml` holds; relative paths are relative to the workspace's folder.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The model, e.g. `onnx/resnet50.onnx`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
    /// `build`'s input shape, e.g. `["-1", "3", "224", "224"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_shape: Vec<String>,
    /// `validate`'s dataset folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<PathBuf>,
    /// PNG masks of the dataset's images, for a segmenter (`validate --masks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masks: Option<PathBuf>,
    /// COCO annotations of the dataset's images, for a detector (`validate --coco`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coco: Option<PathBuf>,
    /// INT8 calibration data (a folder, a file, or `synthetic:SEED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) calib_data: Option<String>,
    /// How images become model input (unset fields follow the model's input).
    #[serde(default, skip_serializing_if = "is_default")]
    pub preprocess: PreprocessRequest,
}

fn is_default(p: &PreprocessRequest) -> bool {
    *p == PreprocessRequest::default()
}

/// A workspace found on disk.
#[derive(Clone, Debug)]
pub struct Workspace {
    /// Its folder.
    pub root: PathBuf,
    /// Its `trtkit.toml`, when it has one (a folder with one model in `onnx/` needs none).
    pub file: Option<PathBuf>,
    /// The file's settings (all unset without a file).
    pub settings: Settings,
    /// The model, resolved against the folder.
    pub model: PathBuf,
}

/// Why no workspace could be used.
#[derive(Debug, thiserror::Error)]
enum NoWorkspace {
    /// Nothing that makes a workspace in the folder or its parents.
    #[error("no trtkit workspace in {0} or its parents (looked for {FILE}, and for an {ONNX_DIR}/ folder holding one .onnx model); make one with `trtkit init MODEL.onnx`, or name the model on the command line")]
    NotFound(String),
    /// An `onnx/` folder with several models and no file saying which.
    #[error("{folder}: holds {} models ({}) and there is no {FILE} to say which is the workspace's; name one in {FILE} (model = \"{ONNX_DIR}/…\") or on the command line", .models.len(), .models.join(", "))]
    Ambiguous {
        /// The `onnx/` folder.
        folder: String,
        /// The models in it.
        models: Vec<String>,
    },
}

impl NoWorkspace {
    /// As an error of kind [`ErrorKind::NoWorkspace`], a mistake in how trtkit was called (run it
    /// in a workspace, or name the model).
    fn into_error(self) -> anyhow::Error {
        TypedError::new(ErrorKind::NoWorkspace, self.to_string())
            .with_hint(Hint::Usage)
            .into()
    }
}

impl Workspace {
    /// A path from the settings (or given relative to the workspace) resolved against its folder.
    pub(crate) fn resolve(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.root.join(path)
        }
    }

    /// The workspace's engine folder.
    pub fn engines(&self) -> PathBuf {
        self.root.join(ENGINES_DIR)
    }

    /// The workspace's calibration cache folder.
    pub fn calibration(&self) -> PathBuf {
        self.root.join(CALIBRATION_DIR)
    }

    /// The dataset folder from the settings, resolved.
    pub fn dataset(&self) -> Option<PathBuf> {
        self.settings.dataset.as_deref().map(|d| self.resolve(d))
    }

    /// The ground truth beside the dataset's images from the settings, resolved: masks, COCO
    /// boxes, or (neither set) a class per image.
    pub fn annotations(&self) -> Annotations {
        let resolved = |p: &Option<PathBuf>| p.as_deref().map(|p| self.resolve(p));
        Annotations::given(
            resolved(&self.settings.masks),
            resolved(&self.settings.coco),
        )
        .unwrap_or_default()
    }

    /// The calibration data from the settings, resolved (a `synthetic:` source as it is).
    pub(crate) fn calib_data(&self) -> Option<String> {
        let c = self.settings.calib_data.as_deref()?;
        Some(map_calib_path(c, |p| self.resolve(p)))
    }

    /// The `[preprocess]` keys whose values come from the file under `given` (set there and
    /// not by a flag), so an error in the preprocessing can name them.
    pub(crate) fn preprocess_keys_from_file(&self, given: &PreprocessRequest) -> Vec<&'static str> {
        let (f, g) = (&self.settings.preprocess, given);
        [
            ("resize", f.resize.is_some() && g.resize.is_none()),
            ("crop", f.crop.is_some() && g.crop.is_none()),
            (
                "interpolation",
                f.interpolation.is_some() && g.interpolation.is_none(),
            ),
            ("mean", f.mean.is_some() && g.mean.is_none()),
            ("std", f.std.is_some() && g.std.is_none()),
            ("layout", f.layout.is_some() && g.layout.is_none()),
            (
                "channel_order",
                f.channel_order.is_some() && g.channel_order.is_none(),
            ),
        ]
        .into_iter()
        .filter_map(|(key, from_file)| from_file.then_some(key))
        .collect()
    }

    /// `given` laid over the workspace's preprocessing: each flag given wins, each unset one
    /// takes the file's value.
    pub(crate) fn preprocess_under(&self, given: &PreprocessRequest) -> PreprocessRequest {
        given.with_defaults_from(&self.settings.preprocess)
    }
}

/// The preprocessing a command applies: `given` laid over the workspace's, when there is one.
pub(crate) fn preprocess_in(ws: Option<&Workspace>, given: PreprocessRequest) -> PreprocessRequest {
    match ws {
        Some(ws) => ws.preprocess_under(&given),
        None => given,
    }
}

/// A calibration source with its path mapped by `f`; a `synthetic:SEED` source names no file
/// and stays as it is.
pub(crate) fn map_calib_path(source: &str, f: impl FnOnce(&Path) -> PathBuf) -> String {
    if source.starts_with("synthetic:") {
        source.to_string()
    } else {
        f(Path::new(source)).display().to_string()
    }
}

impl Workspace {
    /// Whether `path` (a model or engine named on the command line) lies inside the workspace,
    /// so that the workspace's settings apply to it.
    pub fn contains(&self, path: &Path) -> bool {
        let canon = |p: &Path| std::fs::canonicalize(p).ok();
        match (canon(path), canon(&self.root)) {
            (Some(p), Some(root)) => p.starts_with(root),
            _ => false,
        }
    }
}

/// Reads a workspace's `trtkit.toml`; a syntax error, an unknown key or a value that is not one
/// (an `input_shape` that is not a shape) names the file and the key.
pub(crate) fn read_settings(file: &Path) -> Result<Settings> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("{}: cannot read", file.display()))?;
    let settings: Settings = toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: {}",
            file.display(),
            e.to_string().trim().replace('\n', " ")
        )
    })?;
    if let Err(e) = parse_shape_tokens(&settings.input_shape) {
        bail!(
            "{}: input_shape {:?}: {e:#}",
            file.display(),
            settings.input_shape
        );
    }
    Ok(settings)
}

/// The `.onnx` files directly in `dir`, sorted.
fn models_in(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    found.sort();
    found
}

/// Finds the workspace that `start` lies in: the nearest folder, `start` or a parent, with a
/// `trtkit.toml` or with an `onnx/` folder holding models.
pub fn find(start: &Path) -> Result<Workspace> {
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    for dir in start.ancestors() {
        let file = dir.join(FILE);
        if file.is_file() {
            let settings = read_settings(&file)?;
            let model = match &settings.model {
                Some(m) => dir.join(m),
                None => only_model(dir)?.ok_or_else(|| {
                    anyhow::anyhow!(
                        "{}: names no model, and {} has none; add model = \"{ONNX_DIR}/….onnx\"",
                        file.display(),
                        dir.join(ONNX_DIR).display()
                    )
                })?,
            };
            return Ok(Workspace {
                root: dir.to_path_buf(),
                file: Some(file),
                settings,
                model,
            });
        }
        if let Some(model) = only_model(dir)? {
            return Ok(Workspace {
                root: dir.to_path_buf(),
                file: None,
                settings: Settings::default(),
                model,
            });
        }
    }
    Err(NoWorkspace::NotFound(start.display().to_string()).into_error())
}

/// The one model in `dir/onnx/`; several are an error naming them.
fn only_model(dir: &Path) -> Result<Option<PathBuf>> {
    let folder = dir.join(ONNX_DIR);
    let models = models_in(&folder);
    match models.len() {
        0 => Ok(None),
        1 => Ok(models.into_iter().next()),
        _ => Err(NoWorkspace::Ambiguous {
            folder: folder.display().to_string(),
            models: models
                .iter()
                .filter_map(|m| m.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect(),
        }
        .into_error()),
    }
}

/// The workspace of the current folder, if there is one; a broken `trtkit.toml` is still an
/// error (it is there, and wrong), a missing or ambiguous workspace is not.
pub fn current() -> Result<Option<Workspace>> {
    let here = std::env::current_dir().context("the current folder")?;
    match find(&here) {
        Ok(ws) => Ok(Some(ws)),
        Err(e) if kind_of(&e) == Some(ErrorKind::NoWorkspace) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settings_file_is_found_from_a_subfolder_and_resolves_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("onnx")).unwrap();
        std::fs::create_dir_all(root.join("deep/er")).unwrap();
        std::fs::write(root.join("onnx/m.onnx"), b"x").unwrap();
        std::fs::write(
            root.join(FILE),
            "model = \"onnx/m.onnx\"\ndataset = \"val\"\ninput_shape = [\"-1\", \"3\", \"8\", \"8\"]\n[preprocess]\nresize = 0\nmean = [0.5, 0.5, 0.5]\n",
        )
        .unwrap();
        let ws = find(&root.join("deep/er")).unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        assert_eq!(ws.root, root);
        assert_eq!(ws.model, root.join("onnx/m.onnx"));
        assert_eq!(ws.dataset(), Some(root.join("val")));
        assert_eq!(ws.settings.input_shape, ["-1", "3", "8", "8"]);
        let given = PreprocessRequest {
            mean: Some([0.1, 0.2, 0.3]),
            ..Default::default()
        };
        let merged = ws.preprocess_under(&given);
        assert_eq!(merged.mean, Some([0.1, 0.2, 0.3]), "the flag wins");
        assert_eq!(merged.resize, Some(0), "the file fills what was not given");
        assert!(ws.contains(&root.join("onnx/m.onnx")));
        assert!(!ws.contains(Path::new("/")));
    }

    #[test]
    fn one_model_in_onnx_is_a_workspace_and_two_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("onnx")).unwrap();
        std::fs::write(root.join("onnx/a.onnx"), b"x").unwrap();
        let ws = find(root).unwrap();
        assert!(ws.file.is_none());
        assert!(ws.model.ends_with("onnx/a.onnx"));
        std::fs::write(root.join("onnx/b.onnx"), b"x").unwrap();
        let err = find(root).unwrap_err().to_string();
        assert!(
            err.contains("a.onnx, b.onnx") && err.contains(FILE),
            "{err}"
        );
    }

    #[test]
    fn a_bad_file_and_no_workspace_are_said() {
        let dir = tempfile::tempdir().unwrap();
        let err = find(dir.path()).unwrap_err();
        assert_eq!(kind_of(&err), Some(ErrorKind::NoWorkspace));
        assert!(err.to_string().contains("trtkit init MODEL.onnx"), "{err}");
        std::fs::write(dir.path().join(FILE), "modle = \"x.onnx\"\n").unwrap();
        let err = find(dir.path()).unwrap_err().to_string();
        assert!(err.contains(FILE) && err.contains("modle"), "{err}");
    }
}
