//! The flag hints the command line adds to typed library errors: the library says what is
//! wrong in its own terms, the command line says which flag fixes it.

use crate::backend::batch_memory::TooLargeForMemory;
use crate::cli::usage;
use crate::jobs::compare::{NotComparable, UndeclaredShape, Verdict};
use crate::jobs::quantize::RewriteDoesNotLoad;
use crate::jobs::run::NeedsGpuBackend;
use crate::jobs::validate::BadPreprocess;
use crate::onnx::shape::NamedAxisError;
use crate::setting::{FixWith, Setting};
use crate::tensor::{Dim, UnfixedAxis};

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
pub(crate) fn unfixed_axis_fix(e: &UnfixedAxis) -> String {
    let shape: Vec<String> = e
        .dims
        .iter()
        .enumerate()
        .map(|(axis, d)| match d {
            Dim::Fixed(n) => n.to_string(),
            _ if axis == 0 => "-1".to_string(),
            _ => "SIZE".to_string(),
        })
        .collect();
    let by_index = format!("--dim {}:{}=SIZE", e.tensor, e.axis);
    let dim = match &e.dim {
        Dim::Symbol(s) => format!("--dim {s}=SIZE, {by_index}"),
        _ => by_index,
    };
    format!("{dim} or --input-shape {}:{}", e.tensor, shape.join("x"))
}

/// `err` with the hint that names the flag to use, and as a usage error (exit 2) where the
/// mistake is in the command line; other errors come back unchanged.
pub(crate) fn with_hint(err: anyhow::Error) -> anyhow::Error {
    let line = format!("{err:#}");
    // A context, found by the error's own downcast (the chain's entries are its wrappers).
    if let Some(e) = err.downcast_ref::<RewriteDoesNotLoad>() {
        if e.free_axes.is_empty() {
            return anyhow::anyhow!("{line} (--no-check writes it unchecked)");
        }
        return anyhow::anyhow!(
            "{line} (give those axes sizes for the check with --input-shape or --dim NAME=SIZE, or --no-check writes it unchecked)"
        );
    }
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<TooLargeForMemory>() {
            // One sample that does not fit is the model's size, not a flag to lower.
            if e.samples == 1 {
                return anyhow::anyhow!("{line}");
            }
            return usage(format!("{line} (lower {})", setting_hint(e.setting)));
        }
        if let Some(fix) = cause.downcast_ref::<FixWith>() {
            return anyhow::anyhow!("{line} ({})", setting_hint(fix.setting));
        }
        if let Some(NamedAxisError::Batch { .. }) = cause.downcast_ref::<NamedAxisError>() {
            return anyhow::anyhow!("{line} (use --batch-size)");
        }
        if let Some(e) = cause.downcast_ref::<UnfixedAxis>() {
            return anyhow::anyhow!("{line}; give it with {}", unfixed_axis_fix(e));
        }
        if cause.is::<UndeclaredShape>() {
            return anyhow::anyhow!("{line}; give it with --input-shape");
        }
        if let Some(e) = cause.downcast_ref::<NeedsGpuBackend>() {
            let flag = setting_hint(e.setting);
            return usage(format!(
                "{flag} needs a backend that enqueues on trtkit's CUDA streams; {} does not (it is timed on the wall clock)",
                e.backend
            ));
        }
        if let Some(Verdict::Below { .. } | Verdict::NonFinite { .. }) =
            cause.downcast_ref::<Verdict>()
        {
            // The same chain, the verdict saying which flag set its threshold.
            let said: Vec<String> = err
                .chain()
                .map(|c| match c.downcast_ref::<Verdict>() {
                    Some(v) => v.said(Some("--fail-below")),
                    None => c.to_string(),
                })
                .collect();
            return anyhow::anyhow!("{}", said.join(": "));
        }
        if cause.is::<NotComparable>() || cause.is::<BadPreprocess>() {
            return usage(line);
        }
    }
    err
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::UsageError;
    use crate::tensor::Dim;

    #[test]
    fn typed_errors_get_their_flag() {
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
        let e: anyhow::Error = NeedsGpuBackend {
            setting: Setting::Streams,
            backend: "tract-cpu".into(),
        }
        .into();
        let hinted = with_hint(e);
        assert!(hinted.is::<UsageError>());
        assert!(hinted.to_string().starts_with("--streams needs"));
        let fix = crate::setting::fix_with(Setting::Labels, "d: no class sub-folders");
        assert_eq!(
            with_hint(fix).to_string(),
            "d: no class sub-folders (--labels FILE)"
        );
        let below: anyhow::Error = Verdict::Below {
            output: "logits".into(),
            what: "equality",
            pct: 98.5,
            threshold: 99.0,
        }
        .into();
        assert_eq!(
            format!("{:#}", with_hint(below.context("A vs B"))),
            "A vs B: output 'logits': equality 98.50% is below --fail-below 99"
        );
        let refused =
            anyhow::anyhow!("tract cannot analyse the model").context(RewriteDoesNotLoad {
                backend: "tract-cpu".into(),
                free_axes: vec!["x[2] (height)".into()],
            });
        let hinted = format!("{:#}", with_hint(refused));
        assert!(
            hinted.starts_with("the rewritten model does not load in tract-cpu at batch 1 with free axes x[2] (height); nothing written: tract cannot analyse")
                && hinted.ends_with("--input-shape or --dim NAME=SIZE, or --no-check writes it unchecked)"),
            "{hinted}"
        );
        let plain = with_hint(anyhow::anyhow!("disk full"));
        assert_eq!(plain.to_string(), "disk full");
    }
}
