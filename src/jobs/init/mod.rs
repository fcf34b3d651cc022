//! The `init` job: makes a workspace from a model and the settings given — the model copied (or
//! linked) into `onnx/` with its external data files, `engines/` and `calibration/` created, `trtkit.toml` written — and
//! the effective settings of a workspace with where each came from (`init --show`).

mod external_data;

use crate::atomic_file::write_atomic;
use crate::onnx::model::decode_model;
use crate::workspace::{
    map_calib_path, Settings, Workspace, CALIBRATION_DIR, ENGINES_DIR, FILE, ONNX_DIR,
};
use anyhow::{bail, Context, Result};
use external_data::take_external_data;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What `init` is asked to do.
#[derive(Clone, Debug)]
pub struct InitConfig {
    /// The model to take in.
    pub model: PathBuf,
    /// The workspace folder (created when missing).
    pub dir: PathBuf,
    /// Link the model instead of copying it.
    pub link: bool,
    /// Replace an existing `trtkit.toml` (and a different model of the same name).
    pub(crate) force: bool,
    /// The settings to write (paths as given, relative to the current folder).
    pub settings: Settings,
}

/// What `init` did.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InitReport {
    /// The workspace folder.
    pub root: String,
    /// The settings file written.
    pub file: String,
    /// The model inside the workspace.
    pub model: String,
    /// Whether it was linked rather than copied.
    pub(crate) linked: bool,
    /// The external data files of the model, copied (or, linked, read) beside it.
    #[serde(default)]
    pub external_data: Vec<String>,
    /// The settings as written (paths relative to the workspace where they lie inside it).
    pub settings: Settings,
}

/// A path given relative to the current folder, as the workspace will read it: relative to
/// its folder when it lies inside, else absolute.
fn for_workspace(path: &Path, root: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    abs.strip_prefix(&root)
        .map(Path::to_path_buf)
        .unwrap_or(abs)
}

/// Makes the workspace.
pub fn init(config: &InitConfig) -> Result<InitReport> {
    let shown = config.model.display();
    let bytes = std::fs::read(&config.model).with_context(|| format!("{shown}: cannot read"))?;
    let proto =
        decode_model(&bytes).with_context(|| format!("{shown}: init needs an ONNX model"))?;
    let root = &config.dir;
    let file = root.join(FILE);
    if file.exists() && !config.force {
        bail!(
            "{}: a workspace is already here; --force replaces its settings",
            file.display()
        );
    }
    let name = config
        .model
        .file_name()
        .with_context(|| format!("{shown}: not a file name"))?;
    for sub in [ONNX_DIR, ENGINES_DIR, CALIBRATION_DIR] {
        std::fs::create_dir_all(root.join(sub))
            .with_context(|| format!("{}: cannot create", root.join(sub).display()))?;
    }
    let dest = root.join(ONNX_DIR).join(name);
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if dest.exists() && !same(&dest, &config.model) {
        let identical = std::fs::read(&dest).is_ok_and(|d| d == bytes);
        if !identical && !config.force {
            bail!(
                "{}: another model of that name is already in the workspace; --force replaces it",
                dest.display()
            );
        }
    }
    let graph = proto
        .graph
        .as_ref()
        .context("a decoded model has a graph")?;
    let into = (root.join(ONNX_DIR), config.link, config.force);
    let external_data = take_external_data(&config.model, graph, into)?;
    if !same(&dest, &config.model) {
        if config.link {
            let target = std::fs::canonicalize(&config.model)
                .with_context(|| format!("{shown}: cannot resolve"))?;
            let _ = std::fs::remove_file(&dest);
            std::os::unix::fs::symlink(&target, &dest)
                .with_context(|| format!("{}: cannot link to {shown}", dest.display()))?;
        } else {
            write_atomic(&dest, &bytes)?;
        }
    }
    let given = &config.settings;
    let settings = Settings {
        model: Some(Path::new(ONNX_DIR).join(name)),
        input_shape: given.input_shape.clone(),
        dataset: given.dataset.as_deref().map(|d| for_workspace(d, root)),
        masks: given.masks.as_deref().map(|d| for_workspace(d, root)),
        coco: given.coco.as_deref().map(|d| for_workspace(d, root)),
        calib_data: given
            .calib_data
            .as_deref()
            .map(|c| map_calib_path(c, |p| for_workspace(p, root))),
        preprocess: given.preprocess.clone(),
    };
    let text = toml::to_string(&settings).context("writing trtkit.toml")?;
    let header = "# trtkit workspace: the model and the settings trtkit's commands take from here.\n# A flag on the command line wins over a value here; `trtkit init --show` prints what applies.\n";
    write_atomic(&file, format!("{header}{text}").as_bytes())?;
    Ok(InitReport {
        root: root.display().to_string(),
        file: file.display().to_string(),
        model: dest.display().to_string(),
        linked: config.link,
        external_data,
        settings,
    })
}

/// Where an effective setting comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A flag on the command line.
    CommandLine,
    /// The workspace's `trtkit.toml`.
    Workspace,
    /// The only model in `onnx/`.
    OnlyModel,
    /// Nothing set it: the command's default (which follows the model's input for preprocessing).
    Default,
}

/// One setting as it applies, and where it came from.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Effective {
    /// The setting's name, as in `trtkit.toml`.
    pub name: String,
    /// Its value, printed (`-` when unset).
    pub value: String,
    /// Where it came from.
    pub source: Source,
}

/// The effective settings of `ws` with `flags` (from the command line) laid over it.
pub(crate) fn effective(ws: &Workspace, flags: &Settings) -> Vec<Effective> {
    let file = &ws.settings;
    let pick = |name: &str, cli: Option<String>, ws_value: Option<String>| {
        let (value, source) = match (cli, ws_value) {
            (Some(v), _) => (v, Source::CommandLine),
            (None, Some(v)) => (v, Source::Workspace),
            (None, None) => ("-".to_string(), Source::Default),
        };
        Effective {
            name: name.into(),
            value,
            source,
        }
    };
    let shape = |s: &[String]| (!s.is_empty()).then(|| s.join(" "));
    let path = |p: &Option<PathBuf>| p.as_ref().map(|p| ws.resolve(p).display().to_string());
    let mut out = vec![Effective {
        name: "model".into(),
        value: ws.model.display().to_string(),
        source: if file.model.is_some() {
            Source::Workspace
        } else {
            Source::OnlyModel
        },
    }];
    out.push(pick(
        "input_shape",
        shape(&flags.input_shape),
        shape(&file.input_shape),
    ));
    out.push(pick(
        "dataset",
        flags.dataset.as_ref().map(|d| d.display().to_string()),
        path(&file.dataset),
    ));
    for (key, flag, set) in [
        ("masks", &flags.masks, &file.masks),
        ("coco", &flags.coco, &file.coco),
    ] {
        out.push(pick(
            key,
            flag.as_ref().map(|d| d.display().to_string()),
            path(set),
        ));
    }
    out.push(pick(
        "calib_data",
        flags.calib_data.clone(),
        ws.calib_data(),
    ));
    let fields = |p: &crate::data::preprocess::PreprocessRequest| -> Vec<Option<String>> {
        let json = serde_json::to_value(p).unwrap_or_default();
        PREPROCESS_FIELDS
            .iter()
            .map(|f| json.get(*f).filter(|v| !v.is_null()).map(|v| v.to_string()))
            .collect()
    };
    let (cli, from_file) = (fields(&flags.preprocess), fields(&file.preprocess));
    for (i, f) in PREPROCESS_FIELDS.iter().enumerate() {
        out.push(pick(
            &format!("preprocess.{f}"),
            cli[i].clone(),
            from_file[i].clone(),
        ));
    }
    out
}

/// The preprocessing settings, in the order they are printed.
const PREPROCESS_FIELDS: [&str; 7] = [
    "resize",
    "crop",
    "interpolation",
    "mean",
    "std",
    "layout",
    "channel_order",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::preprocess::PreprocessRequest;
    use crate::onnx::test_models;
    use crate::onnx::OnnxModel;

    #[test]
    fn init_copies_the_model_writes_settings_and_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("clf.onnx");
        OnnxModel::from_proto(test_models::classifier(None), &src)
            .save(&src)
            .unwrap();
        let root = dir.path().join("ws");
        let config = InitConfig {
            model: src.clone(),
            dir: root.clone(),
            link: false,
            force: false,
            settings: Settings {
                dataset: Some(root.join("val")),
                masks: None,
                coco: None,
                calib_data: Some("synthetic:3".into()),
                input_shape: vec!["-1".into(), "3".into(), "16".into(), "16".into()],
                preprocess: PreprocessRequest {
                    resize: Some(0),
                    mean: Some([0.5, 0.5, 0.5]),
                    ..Default::default()
                },
                model: None,
            },
        };
        let r = init(&config).unwrap();
        assert_eq!(
            std::fs::read(&r.model).unwrap(),
            std::fs::read(&src).unwrap()
        );
        for sub in [ENGINES_DIR, CALIBRATION_DIR] {
            assert!(root.join(sub).is_dir());
        }
        let ws = crate::workspace::find(&root).unwrap();
        assert_eq!(ws.settings.dataset.as_deref(), Some(Path::new("val")));
        assert_eq!(ws.settings.calib_data.as_deref(), Some("synthetic:3"));
        assert_eq!(ws.settings.preprocess.mean, Some([0.5, 0.5, 0.5]));
        let err = init(&config).unwrap_err().to_string();
        assert!(err.contains("--force"), "{err}");
        init(&InitConfig {
            force: true,
            ..config.clone()
        })
        .unwrap();

        let flags = Settings {
            preprocess: PreprocessRequest {
                mean: Some([0.1, 0.1, 0.1]),
                ..Default::default()
            },
            ..Default::default()
        };
        let eff = effective(&ws, &flags);
        let get = |n: &str| eff.iter().find(|e| e.name == n).unwrap().clone();
        assert_eq!(get("preprocess.mean").source, Source::CommandLine);
        assert_eq!(get("preprocess.resize").source, Source::Workspace);
        assert_eq!(get("preprocess.crop").source, Source::Default);
        assert_eq!(get("model").source, Source::Workspace);
        assert_eq!(get("input_shape").value, "-1 3 16 16");
    }

    #[test]
    fn a_file_that_is_not_onnx_makes_no_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("x.onnx");
        std::fs::write(&bad, b"\x89PNG\r\n\x1a\n").unwrap();
        let err = init(&InitConfig {
            model: bad,
            dir: dir.path().join("ws"),
            link: false,
            force: false,
            settings: Settings::default(),
        })
        .unwrap_err();
        assert!(format!("{err:#}").contains("x.onnx"), "{err:#}");
        assert!(!dir.path().join("ws").exists());
    }
}
