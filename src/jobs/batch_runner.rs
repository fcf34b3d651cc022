//! The batch runner: feeds any number of samples through a backend, batch by batch, padding the
//! last batch to the backend's batch size and dropping the padded rows from the outputs. The
//! comparator and the accuracy evaluation both run their models through it.

use crate::backend::Backend;
use crate::data::batch_axis::{concat, slice_padded, truncate};
use crate::progress::Progress;
use crate::tensor::HostTensor;
use anyhow::{bail, Context, Result};
use std::time::Duration;

/// What a run over many samples gives back.
#[derive(Clone, Debug)]
pub struct BatchedOutputs {
    /// One tensor per backend output, all samples joined along axis 0.
    pub outputs: Vec<HostTensor>,
    /// Inference time summed over the batches (as the backend measured it).
    pub inference: Duration,
    /// Samples run.
    pub samples: usize,
}

/// The number of samples along axis 0, the same for every tensor.
pub fn samples_of(inputs: &[HostTensor]) -> Result<usize> {
    let n = inputs
        .first()
        .and_then(|t| t.shape.first().copied())
        .context("the inputs have no batch axis")?;
    for t in inputs {
        if t.shape.first() != Some(&n) {
            bail!(
                "input '{}' has shape {:?}, but the other inputs have {n} samples",
                t.name,
                t.shape
            );
        }
    }
    if n == 0 {
        bail!("the inputs have 0 samples");
    }
    Ok(n)
}

/// Runs `inputs` (every tensor with the same number of samples on axis 0) through `backend`
/// in batches of `batch`, and joins the outputs. `progress` advances by samples.
pub fn run_batched(
    backend: &mut dyn Backend,
    inputs: &[HostTensor],
    batch: usize,
    progress: &dyn Progress,
) -> Result<BatchedOutputs> {
    if batch == 0 {
        bail!("the batch size must be at least 1");
    }
    let samples = samples_of(inputs)?;
    let mut parts: Vec<Vec<HostTensor>> = Vec::new();
    let mut inference = Duration::ZERO;
    let mut start = 0;
    while start < samples {
        let take = batch.min(samples - start);
        let chunk = inputs
            .iter()
            .map(|t| slice_padded(t, start, batch))
            .collect::<Result<Vec<_>>>()?;
        let out = backend.run(&chunk).with_context(|| {
            format!(
                "{} failed on samples {start}..{}",
                backend.name(),
                start + take
            )
        })?;
        inference += out.elapsed;
        let kept = out
            .outputs
            .into_iter()
            .map(|t| {
                if take < batch {
                    truncate(t, take)
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
        outputs: join(parts)?,
        inference,
        samples,
    })
}

/// Joins per-batch outputs along axis 0, output by output.
fn join(parts: Vec<Vec<HostTensor>>) -> Result<Vec<HostTensor>> {
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
    columns.into_iter().map(concat).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tract::{TractBackend, TractOptions};
    use crate::onnx::{test_models, OnnxModel};
    use crate::progress::NoProgress;
    use crate::tensor::TensorData;

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
    }
}
