//! The flag hints the command line adds to the library's errors: the library says what is wrong
//! in its own terms and, as the error's [`Hint`], what the user can change; the command line
//! says which flag does it. One lookup ([`hinted`]) reads the hint, whatever the error is.

use crate::cli::usage;
use crate::error::{hinted, FreeAxis, Hint, Setting};

/// The flags that change a setting, as a hint appended to the library's message.
pub(crate) fn setting_hint(setting: Setting) -> &'static str {
    match setting {
        Setting::Device => "--device cuda needs a GPU; use --device cpu",
        Setting::DeviceId => "--device-id",
        Setting::Threads => "--threads 1, or --batch-size at the model's batch",
        Setting::BatchSize => "--batch-size",
        Setting::Samples => "--num-samples",
        Setting::InputShape => "set it with --input-shape, or --dim NAME=SIZE (or --dim INPUT:AXIS=SIZE) for one axis",
        Setting::Labels => "--labels FILE",
        Setting::ClassMap => "--class-map FILE",
        Setting::Crop => "--crop",
        Setting::Layout => "--layout",
        Setting::Preprocess => "--resize, --crop, --mean, --std, --layout",
        Setting::KeepFp32Nodes => "--keep-fp32-nodes, --keep-fp32-regex",
        Setting::CalibData => "--calib-data SRC: a folder of images or .npy/.npz, one such file, or synthetic:SEED; or --calibration-cache FILE",
        Setting::Int8 => "--calib-data and --calibration-cache need --int8",
        Setting::BatchRange => "--min-batch/--opt-batch/--max-batch",
        Setting::ShapeRanges => "--dim NAME=MIN:OPT:MAX or --dim INPUT:AXIS=MIN:OPT:MAX, --input-shape, or --min-shapes/--opt-shapes/--max-shapes NAME:DIMS",
        Setting::TensorrtDir => "or pass --tensorrt-dir DIR",
        Setting::NoTransfers => "--no-transfers",
        Setting::CudaGraph => "--cuda-graph",
        Setting::Streams => "--streams",
    }
}

/// The flags that fix an axis left free, spelled as they are accepted: `--dim NAME=SIZE` where
/// the model names the axis, `--dim INPUT:AXIS=SIZE` always, and the whole `--input-shape`
/// (`-1` for the batch, `SIZE` for each free axis).
pub(crate) fn free_axis_fix(free: &FreeAxis) -> String {
    let shape: Vec<String> = free
        .shape
        .iter()
        .enumerate()
        .map(|(axis, d)| match d {
            Some(n) => n.to_string(),
            None if axis == 0 => "-1".to_string(),
            None => "SIZE".to_string(),
        })
        .collect();
    let by_index = format!("--dim {}:{}=SIZE", free.tensor, free.axis);
    let dim = match &free.symbol {
        Some(s) => format!("--dim {s}=SIZE, {by_index}"),
        None => by_index,
    };
    format!("{dim} or --input-shape {}:{}", free.tensor, shape.join("x"))
}

/// `err` with the hint that names the flag to use, and as a usage error (exit 2) where the
/// mistake is in the command line; other errors come back unchanged.
pub(crate) fn with_hint(err: anyhow::Error) -> anyhow::Error {
    let line = format!("{err:#}");
    let Some(hinted) = hinted(&err) else {
        return err;
    };
    let Some(hint) = hinted.hint() else {
        return err;
    };
    match hint {
        Hint::Change(setting) => anyhow::anyhow!("{line} ({})", setting_hint(*setting)),
        Hint::Lower(setting) => usage(format!("{line} (lower {})", setting_hint(*setting))),
        // The setting is the subject of the library's message.
        Hint::NeedsGpuBackend(setting) => {
            usage(format!("{} {}", setting_hint(*setting), hinted.message()))
        }
        Hint::Wrong(_) | Hint::Usage => usage(line),
        Hint::SizeAxis(free) => anyhow::anyhow!("{line}; give it with {}", free_axis_fix(free)),
        Hint::GiveShape => anyhow::anyhow!("{line}; give it with --input-shape"),
        Hint::SkipCheck { free_axes: false } => {
            anyhow::anyhow!("{line} (--no-check writes it unchecked)")
        }
        Hint::SkipCheck { free_axes: true } => anyhow::anyhow!(
            "{line} (give those axes sizes for the check with --input-shape or --dim NAME=SIZE, or --no-check writes it unchecked)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::is_usage;
    use crate::error::TypedError;
    use crate::tensor::{Dim, UnfixedAxis};

    #[test]
    fn hinted_errors_get_their_flag() {
        let width = Dim::Symbol("width".into());
        let e: anyhow::Error = UnfixedAxis {
            tensor: "x".into(),
            axis: 2,
            dim: width.clone(),
            dims: vec![Dim::Unknown, Dim::Fixed(3), width, Dim::Unknown],
        }
        .into();
        let hinted = with_hint(e.context("m.onnx"));
        assert!(
            format!("{hinted:#}").ends_with(
                "give it with --dim width=SIZE, --dim x:2=SIZE or --input-shape x:-1x3xSIZExSIZE"
            ),
            "{hinted:#}"
        );
        let unnamed: anyhow::Error = UnfixedAxis {
            tensor: "x".into(),
            axis: 1,
            dim: Dim::Unknown,
            dims: vec![Dim::Fixed(1), Dim::Unknown],
        }
        .into();
        assert!(format!("{:#}", with_hint(unnamed))
            .ends_with("give it with --dim x:1=SIZE or --input-shape x:1xSIZE"),);
        let e: anyhow::Error = TypedError::hinted(
            Hint::NeedsGpuBackend(Setting::Streams),
            "needs a GPU backend",
        )
        .into();
        let hinted = with_hint(e.context("run"));
        assert!(is_usage(&hinted));
        assert_eq!(hinted.to_string(), "--streams needs a GPU backend");
        let fix = crate::error::fix_with(Setting::Labels, "d: no class sub-folders");
        let hinted = with_hint(fix);
        assert_eq!(
            hinted.to_string(),
            "d: no class sub-folders (--labels FILE)"
        );
        assert!(!is_usage(&hinted));
        let lower: anyhow::Error =
            TypedError::hinted(Hint::Lower(Setting::BatchSize), "4096 samples need 90 GiB").into();
        let hinted = with_hint(lower);
        assert!(is_usage(&hinted));
        assert_eq!(
            hinted.to_string(),
            "4096 samples need 90 GiB (lower --batch-size)"
        );
        let refused: anyhow::Error = TypedError::hinted(
            Hint::SkipCheck { free_axes: true },
            "the rewritten model does not load",
        )
        .caused_by(anyhow::anyhow!("tract cannot analyse the model"))
        .into();
        let hinted = format!("{:#}", with_hint(refused));
        assert!(
            hinted.starts_with("the rewritten model does not load: tract cannot analyse")
                && hinted.ends_with(
                    "--input-shape or --dim NAME=SIZE, or --no-check writes it unchecked)"
                ),
            "{hinted}"
        );
        let wrong: anyhow::Error =
            TypedError::hinted(Hint::Wrong(Setting::Preprocess), "crop 300 > 224").into();
        assert!(is_usage(&with_hint(wrong)));
        let plain = with_hint(anyhow::anyhow!("disk full"));
        assert_eq!(plain.to_string(), "disk full");
        assert!(!is_usage(&plain));
    }
}
