//! Whether a batch fits before anything is allocated for it: the bytes its inputs and outputs
//! take, against the memory the machine has left (host memory, and a GPU's free memory for the
//! runs that put the batch there). A batch size far past it is a mistake on the command line,
//! said in one line, rather than an allocation that aborts the process.

use crate::cuda::device::Gpu;
use crate::error::{ErrorKind, Hint, Setting, TypedError};
use crate::onnx::dtype::dtype_bits;
use crate::onnx::tensor_info::TensorInfo;
use crate::onnx::OnnxModel;
use crate::tensor::{Dim, IoSpec};
use crate::units::bytes;
use std::collections::HashSet;
use std::fmt;

/// A batch (or a set of samples) too large for the memory left. As an `anyhow` error it is a
/// [`TypedError`] of kind [`ErrorKind::TooLargeForMemory`] whose hint is to lower its setting
/// (none where one sample alone does not fit: that is the model's size, not a flag to lower).
#[derive(Debug)]
pub struct TooLargeForMemory {
    /// The setting that asked for them (the batch size, or the number of samples).
    pub setting: Setting,
    /// Samples asked for.
    pub samples: usize,
    /// Bytes one sample takes.
    pub(crate) per_sample: u64,
    /// Bytes all of them take.
    pub needed: u64,
    /// Bytes available.
    pub available: u64,
    /// `host` or `GPU`.
    pub place: &'static str,
}

impl fmt::Display for TooLargeForMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at least {} of {} memory for inputs and outputs ({} a sample), and {} is available",
            counted(self.samples),
            bytes(self.needed),
            self.place,
            bytes(self.per_sample),
            bytes(self.available)
        )
    }
}

impl From<TooLargeForMemory> for anyhow::Error {
    fn from(e: TooLargeForMemory) -> anyhow::Error {
        let error = TypedError::new(ErrorKind::TooLargeForMemory, e.to_string());
        match e.samples {
            1 => error.into(),
            _ => error.with_hint(Hint::Lower(e.setting)).into(),
        }
    }
}

/// `N samples need`, or `one sample needs`.
fn counted(samples: usize) -> String {
    match samples {
        1 => "one sample needs".into(),
        n => format!("{n} samples need"),
    }
}

/// Bytes of one sample of a tensor: its axes after the first (the batch), those of unknown
/// size counted as 1, so the figure is a floor.
fn per_sample(bits: u64, dims: &[Dim]) -> u64 {
    let elements = dims
        .iter()
        .skip(1)
        .map(|d| match d {
            Dim::Fixed(n) if *n > 0 => *n as u64,
            _ => 1,
        })
        .fold(1u64, u64::saturating_mul);
    elements.saturating_mul(bits).div_ceil(8)
}

/// Bytes one sample takes in the inputs and outputs `specs` declare.
pub(crate) fn specs_sample_bytes<'a>(specs: impl IntoIterator<Item = &'a IoSpec>) -> u64 {
    specs
        .into_iter()
        .map(|s| per_sample(s.elem_type.size() as u64 * 8, &s.dims))
        .fold(0, u64::saturating_add)
}

/// Bytes one sample takes in the inputs (those not given by an initializer) and outputs
/// `model` declares, read from the graph without preparing it.
pub(crate) fn model_sample_bytes(model: &OnnxModel) -> u64 {
    let graph = model.graph();
    let initialized: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    graph
        .input
        .iter()
        .filter(|v| !initialized.contains(v.name.as_str()))
        .chain(&graph.output)
        .map(|v| {
            let info = TensorInfo::from_value_info(v);
            let bits = dtype_bits(info.dtype_code).unwrap_or(8);
            per_sample(bits, info.dims.as_deref().unwrap_or(&[]))
        })
        .fold(0, u64::saturating_add)
}

/// Checks that `samples` samples of `per_sample` bytes fit in the host memory left (where the
/// system says how much that is).
pub(crate) fn check_host(setting: Setting, samples: usize, per_sample: u64) -> anyhow::Result<()> {
    match crate::host_memory::available_bytes() {
        Some(available) => Ok(check(setting, samples, per_sample, available, "host")?),
        None => Ok(()),
    }
}

/// Checks that a batch of `batch` samples of `io` (inputs, outputs), once per stream, fits in
/// the free memory of `gpu`.
pub(crate) fn check_gpu(
    gpu: &Gpu,
    io: (&[IoSpec], &[IoSpec]),
    batch: usize,
    streams: usize,
) -> anyhow::Result<()> {
    let per_sample =
        specs_sample_bytes(io.0.iter().chain(io.1)).saturating_mul(streams.max(1) as u64);
    check(
        Setting::BatchSize,
        batch,
        per_sample,
        gpu.mem_info()?.free,
        "GPU",
    )?;
    Ok(())
}

/// Checks that `samples` samples of `per_sample` bytes fit in `available` bytes of `place`.
pub fn check(
    setting: Setting,
    samples: usize,
    per_sample: u64,
    available: u64,
    place: &'static str,
) -> Result<(), TooLargeForMemory> {
    let needed = per_sample.saturating_mul(samples as u64);
    if needed <= available {
        return Ok(());
    }
    // Where one sample alone does not fit, no smaller batch would: say so.
    let samples = if per_sample > available { 1 } else { samples };
    Err(TooLargeForMemory {
        setting,
        samples,
        per_sample,
        needed: per_sample.saturating_mul(samples as u64),
        available,
        place,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_models::classifier;
    use crate::tensor::ElemType;

    #[test]
    fn a_sample_counts_every_input_and_output() {
        // input [N,3,16,16] float32 and logits [N,10] float32.
        let model = OnnxModel::from_proto(classifier(None), "c.onnx");
        assert_eq!(model_sample_bytes(&model), (3 * 16 * 16 + 10) * 4);
        let spec = IoSpec {
            name: "x".into(),
            elem_type: ElemType::F16,
            dims: vec![
                Dim::Symbol("n".into()),
                Dim::Fixed(8),
                Dim::Symbol("s".into()),
            ],
        };
        assert_eq!(specs_sample_bytes([&spec, &spec]), 2 * 8 * 2);
    }

    #[test]
    fn too_many_samples_are_refused_with_the_bytes() {
        assert!(check(Setting::BatchSize, 10, 100, 1000, "host").is_ok());
        let e = check(Setting::BatchSize, 11, 100, 1000, "host").unwrap_err();
        assert_eq!((e.needed, e.available), (1100, 1000));
        let huge = check(Setting::BatchSize, usize::MAX, 1 << 20, 1 << 30, "GPU").unwrap_err();
        assert_eq!(huge.needed, u64::MAX);
        assert!(huge.to_string().contains("GPU memory"), "{huge}");
        let one = check(Setting::BatchSize, 8, 1 << 31, 1 << 30, "host").unwrap_err();
        assert_eq!((one.samples, one.needed), (1, 1 << 31));
        assert!(one.to_string().starts_with("one sample needs"), "{one}");
    }
}
