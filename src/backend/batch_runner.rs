//! The batch runner: feeds any number of samples through a backend, batch by batch, padding a
//! short last batch to the backend's batch size where the backend needs that size, and dropping
//! the padded rows from the outputs. Float inputs are converted to the float type the backend
//! takes (float32 data for a graph with float16 inputs). The comparator, the accuracy evaluation, calibration and the
//! INT8 triage run their models through it, so no sample is dropped for not filling a batch.
//! Each tensor is cut and joined on its own batch axis ([`Backend::batch_axes`]); an input with
//! no batch axis goes whole into every batch.

use crate::backend::{Backend, OutputVisitor};
use crate::data::batch_axis::{concat_on, samples_on, slice_padded_on, truncate_on};
use crate::progress::Progress;
use crate::tensor::{conform_floats, BatchAxes, FloatConversion, HostTensor};
use anyhow::{bail, Context, Result};
use std::time::Duration;

/// What a run over many samples gives back.
#[derive(Clone, Debug)]
pub(crate) struct BatchedOutputs {
    /// One tensor per backend output, all samples joined along axis 0.
    pub outputs: Vec<HostTensor>,
    /// Inference time summed over the batches (as the backend measured it).
    pub inference: Duration,
    /// Samples run.
    pub samples: usize,
    /// The inputs converted to the float type the backend takes (none when they fit).
    pub converted: Vec<FloatConversion>,
}

/// The number of samples along axis 0, the same for every input (scalars left out).
pub(crate) fn samples_of(inputs: &[HostTensor]) -> Result<usize> {
    samples_on_axes(inputs, &BatchAxes::default())
}

/// The batch axis of `t` by `axes` (a scalar has none).
pub(crate) fn axis_of(axes: &BatchAxes, t: &HostTensor) -> Result<Option<usize>> {
    Ok(axes.axis(&t.name)?.filter(|_| !t.shape.is_empty()))
}

/// The number of samples along each input's batch axis (`axes`), the same for every input that
/// has one.
pub(crate) fn samples_on_axes(inputs: &[HostTensor], axes: &BatchAxes) -> Result<usize> {
    let mut n = None;
    for t in inputs {
        let Some(axis) = axis_of(axes, t)? else {
            continue;
        };
        let m = samples_on(t, axis)?;
        match n {
            Some(n) if n != m => bail!(
                "input '{}' has shape {:?} ({m} samples on axis {axis}), but the other inputs have {n} samples",
                t.name,
                t.shape
            ),
            _ => n = Some(m),
        }
    }
    let n = n.context("no input has a batch axis")?;
    if n == 0 {
        bail!("the inputs have 0 samples");
    }
    Ok(n)
}

/// Samples `start..start + len` of every tensor on its batch axis, padded ([`slice_padded`]).
fn slice_all(
    tensors: &[HostTensor],
    axes: &BatchAxes,
    start: usize,
    len: usize,
) -> Result<Vec<HostTensor>> {
    tensors
        .iter()
        .map(|t| slice_padded_on(t, axis_of(axes, t)?, start, len))
        .collect()
}

/// Runs `inputs` (every tensor with the same number of samples on axis 0) through `backend`
/// in batches of `batch`, and joins the outputs. A short last batch is padded to `batch` only
/// where the backend needs the full size ([`Backend::runs_short_batch`]): elsewhere the padding
/// would be computed for nothing. A float input the backend takes in another float type is
/// converted batch by batch ([`conform_floats`]). `progress` advances by samples.
pub(crate) fn run_batched(
    backend: &mut dyn Backend,
    inputs: &[HostTensor],
    batch: usize,
    progress: &dyn Progress,
) -> Result<BatchedOutputs> {
    run_batched_from(backend, inputs, batch, 0, progress)
}

/// [`run_batched`] on a window of a longer run whose first sample is sample `first` of the
/// run: errors name the samples by their place in the run.
pub(crate) fn run_batched_from(
    backend: &mut dyn Backend,
    inputs: &[HostTensor],
    batch: usize,
    first: usize,
    progress: &dyn Progress,
) -> Result<BatchedOutputs> {
    if batch == 0 {
        bail!("the batch size must be at least 1");
    }
    let axes = backend.batch_axes();
    let samples = samples_on_axes(inputs, &axes)?;
    let mut parts: Vec<Vec<HostTensor>> = Vec::new();
    let mut inference = Duration::ZERO;
    let mut converted = vec![];
    let mut start = 0;
    while start < samples {
        let take = batch.min(samples - start);
        let run_as = if take < batch && backend.runs_short_batch(take) {
            take
        } else {
            batch
        };
        let chunk = slice_all(inputs, &axes, start, run_as)?;
        let (chunk, conversions) = conform_floats(&chunk, backend.inputs());
        if start == 0 {
            converted = conversions;
        }
        let out = backend.run(&chunk).with_context(|| {
            format!(
                "{} failed on samples {}..{}",
                backend.name(),
                first + start,
                first + start + take
            )
        })?;
        inference += out.elapsed;
        let kept = out
            .outputs
            .into_iter()
            .map(|t| {
                if take < run_as {
                    let axis = axis_of(&axes, &t)?;
                    truncate_on(t, axis, take)
                } else {
                    Ok(t)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        parts.push(kept);
        start += take;
        progress.advance(take as u64);
    }
    Ok(BatchedOutputs {
        outputs: join_on(parts, &axes)?,
        inference,
        samples,
        converted,
    })
}

/// [`Backend::run_visit`] on one batch of up to `batch` samples: a short batch is padded to
/// `batch` where the backend needs that size (it then runs the whole padded batch in one piece,
/// so each output is visited once) and only the real samples' values are visited. Float inputs
/// are converted to the float types the backend takes, as [`run_batched`] does.
pub(crate) fn run_visit_short(
    backend: &mut dyn Backend,
    inputs: &[HostTensor],
    batch: Option<usize>,
    visit: &OutputVisitor,
) -> Result<Duration> {
    let axes = backend.batch_axes();
    let rows = samples_on_axes(inputs, &axes)?;
    let (inputs, _) = conform_floats(inputs, backend.inputs());
    let inputs = inputs.as_ref();
    match batch {
        Some(full) if rows < full && !backend.runs_short_batch(rows) => {
            let padded = slice_all(inputs, &axes, 0, full)?;
            let real = |j: usize, values: &[f32]| visit(j, &values[..values.len() / full * rows]);
            backend.run_visit(&padded, &real)
        }
        _ => backend.run_visit(inputs, visit),
    }
}

/// Joins per-batch tensors (one list per batch, the same tensors in each) along axis 0,
/// tensor by tensor.
pub fn join(parts: Vec<Vec<HostTensor>>) -> Result<Vec<HostTensor>> {
    join_on(parts, &BatchAxes::default())
}

/// Joins per-batch tensors (one list per batch, the same tensors in each) along their batch
/// axes (`axes`), tensor by tensor.
pub(crate) fn join_on(parts: Vec<Vec<HostTensor>>, axes: &BatchAxes) -> Result<Vec<HostTensor>> {
    if parts.len() == 1 {
        return Ok(parts.into_iter().next().unwrap_or_default());
    }
    let n_out = parts.first().map_or(0, Vec::len);
    let mut columns: Vec<Vec<HostTensor>> = (0..n_out).map(|_| Vec::new()).collect();
    for part in parts {
        for (i, t) in part.into_iter().enumerate() {
            columns[i].push(t);
        }
    }
    columns
        .into_iter()
        .map(|column| {
            let axis = match column.first() {
                Some(t) => axis_of(axes, t)?,
                None => Some(0),
            };
            concat_on(column, axis)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tract::{TractBackend, TractOptions};
    use crate::backend::RunOutput;
    use crate::onnx::{test_models, OnnxModel};
    use crate::progress::NoProgress;
    use crate::tensor::{Dim, ElemType, IoSpec, TensorData};

    #[test]
    fn padded_batches_give_the_same_outputs_as_one_run() {
        let model = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let spec = |batch| TractOptions {
            batch: Some(batch),
            threads: Some(1),
            ..Default::default()
        };
        let inputs_spec = TractBackend::load(&model, &spec(5))
            .unwrap()
            .inputs()
            .to_vec();
        let shape = inputs_spec[0].concrete_shape(5).unwrap();
        let n: usize = shape.iter().product();
        let data = TensorData::F32((0..n).map(|i| (i % 13) as f32 / 13.0).collect());
        let x = vec![HostTensor::new(inputs_spec[0].name.clone(), shape, data).unwrap()];
        let mut whole = TractBackend::load(&model, &spec(5)).unwrap();
        let one = run_batched(&mut whole, &x, 5, &NoProgress).unwrap();
        let mut small = TractBackend::load(&model, &spec(2)).unwrap();
        let three = run_batched(&mut small, &x, 2, &NoProgress).unwrap();
        assert_eq!(three.samples, 5);
        assert_eq!(one.outputs[0].shape, three.outputs[0].shape);
        let (a, b) = (one.outputs[0].data.to_f64(), three.outputs[0].data.to_f64());
        assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-5));
        assert!(run_batched(&mut small, &x, 0, &NoProgress).is_err());
        // tract runs one sample a piece for this convolutional model: the short last batch
        // runs the piece it fills, unpadded.
        assert!(small.runs_short_batch(1));
    }

    /// A backend at a fixed batch of 4 that echoes its input and records the batch of every run.
    struct Recorder {
        short: bool,
        io: Vec<IoSpec>,
        batches: Vec<usize>,
    }

    impl Recorder {
        fn new(short: bool) -> Recorder {
            let io = vec![IoSpec {
                name: "x".into(),
                elem_type: ElemType::F32,
                dims: vec![Dim::Fixed(4), Dim::Fixed(2)],
            }];
            Recorder {
                short,
                io,
                batches: vec![],
            }
        }
    }

    impl Backend for Recorder {
        fn name(&self) -> String {
            "recorder".into()
        }
        fn inputs(&self) -> &[IoSpec] {
            &self.io
        }
        fn outputs(&self) -> &[IoSpec] {
            &self.io
        }
        fn run(&mut self, inputs: &[HostTensor]) -> Result<RunOutput> {
            self.batches.push(inputs[0].shape[0]);
            Ok(RunOutput {
                outputs: inputs.to_vec(),
                elapsed: Duration::ZERO,
            })
        }
        fn runs_short_batch(&self, _n: usize) -> bool {
            self.short
        }
    }

    #[test]
    fn a_short_last_batch_is_padded_only_where_the_backend_needs_the_full_size() {
        let x = HostTensor::new(
            "x",
            vec![5, 2],
            TensorData::F32((0..10).map(|v| v as f32).collect()),
        )
        .unwrap();
        for (short, ran) in [(false, [4, 4]), (true, [4, 1])] {
            let mut backend = Recorder::new(short);
            let out = run_batched(&mut backend, std::slice::from_ref(&x), 4, &NoProgress).unwrap();
            assert_eq!(
                backend.batches, ran,
                "short batches run as they are: {short}"
            );
            assert_eq!(out.samples, 5);
            assert_eq!(out.outputs[0].shape, [5, 2]);
            assert_eq!(out.outputs[0].data.to_f64(), x.data.to_f64());
        }
    }

    #[test]
    fn a_padded_visit_sees_only_the_real_samples() {
        let x = HostTensor::new(
            "x",
            vec![3, 2],
            TensorData::F32(vec![1., 2., 3., 4., 5., 6.]),
        )
        .unwrap();
        for (short, ran) in [(false, 4), (true, 3)] {
            let mut backend = Recorder::new(short);
            let seen = std::sync::Mutex::new(vec![]);
            let visit = |_: usize, v: &[f32]| {
                seen.lock().unwrap().extend_from_slice(v);
                Ok(())
            };
            run_visit_short(&mut backend, std::slice::from_ref(&x), Some(4), &visit).unwrap();
            assert_eq!(backend.batches, [ran]);
            assert_eq!(seen.into_inner().unwrap(), [1., 2., 3., 4., 5., 6.]);
        }
    }
}
