//! The calibration run: the model with its quantized tensors exposed runs batch after batch on
//! the reference backend while another thread folds the captured tensors into histograms
//! (in parallel across tensors and within large tensors), then the range search runs per
//! tensor in parallel.

use super::batches::CalibrationBatches;
use super::histogram::{Histogram, DEFAULT_BINS};
use super::range::Algorithm;
use crate::backend::tract::{TractBackend, TractOptions};
use crate::backend::{Backend, HostTensor, TensorData};
use crate::onnx::rewrite::capture::{expose, Source};
use crate::onnx::rewrite::plan::QuantPlan;
use crate::onnx::OnnxModel;
use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Histograms of every quantized tensor and where the time went.
#[derive(Debug)]
pub struct Collected {
    /// `(tensor, histogram of |x|)`, in the plan's order.
    pub histograms: Vec<(String, Histogram)>,
    /// Batches run.
    pub batches: usize,
    /// Time inside the backend's `run` calls (the capture model).
    pub model_time: Duration,
    /// Time the histogram thread was busy (overlaps the model runs).
    pub histogram_time: Duration,
    /// Wall time of the whole run over the batches.
    pub wall_time: Duration,
}

/// The range found for one tensor.
#[derive(Clone, Debug, Serialize)]
pub struct TensorRange {
    /// Tensor name.
    pub tensor: String,
    /// Clipping threshold.
    pub amax: f32,
    /// INT8 scale, `amax / 127`.
    pub scale: f32,
    /// Largest |x| seen.
    pub max_abs: f32,
    /// Values seen.
    pub count: u64,
}

fn f32_data<'a>(t: &'a HostTensor, name: &str) -> Result<&'a [f32]> {
    match &t.data {
        TensorData::F32(v) => Ok(v),
        other => bail!(
            "tensor '{name}' is {}, not float32; it cannot be calibrated",
            other.elem_type()
        ),
    }
}

/// Runs `model` over `batches` at batch size `batch` and histograms the plan's activations.
///
/// `on_batch` is called after each batch (for a progress bar).
pub fn collect(
    model: &OnnxModel,
    plan: &QuantPlan,
    batches: &mut dyn CalibrationBatches,
    batch: usize,
    on_batch: &(dyn Fn() + Sync),
) -> Result<Collected> {
    let names = plan.activation_names();
    let capture = expose(model, &names)?;
    let mut backend = TractBackend::load(
        &capture.model,
        &TractOptions {
            batch: Some(batch),
            ..Default::default()
        },
    )?;
    if backend.inputs().len() != 1 {
        bail!(
            "calibration feeds one input, the model has {}",
            backend.inputs().len()
        );
    }
    let sources = capture.sources.clone();
    let started = Instant::now();
    let mut model_time = Duration::ZERO;
    let mut count = 0usize;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<HostTensor>>(2);
    let names_ref = &names;
    let collector = move || -> Result<(Vec<Histogram>, Duration)> {
        let mut hists = vec![Histogram::new(DEFAULT_BINS); names_ref.len()];
        let mut busy = Duration::ZERO;
        for tensors in rx {
            let t0 = Instant::now();
            hists
                .par_iter_mut()
                .zip(tensors.par_iter())
                .zip(names_ref.par_iter())
                .try_for_each(|((h, t), name)| -> Result<()> {
                    h.add(f32_data(t, name)?);
                    Ok(())
                })?;
            busy += t0.elapsed();
        }
        Ok((hists, busy))
    };
    let (hists, busy) = std::thread::scope(|s| -> Result<(Vec<Histogram>, Duration)> {
        let handle = s.spawn(collector);
        let run = (|| -> Result<()> {
            for (i, input) in std::iter::from_fn(|| batches.next()).enumerate() {
                let input = input.with_context(|| format!("calibration batch {i}"))?;
                let out = backend
                    .run(std::slice::from_ref(&input))
                    .with_context(|| format!("calibration batch {i}"))?;
                model_time += out.elapsed;
                let mut outputs: Vec<Option<HostTensor>> =
                    out.outputs.into_iter().map(Some).collect();
                let captured: Vec<HostTensor> = sources
                    .iter()
                    .map(|(_, src)| match src {
                        Source::Input(_) => input.clone(),
                        Source::Output(j) => {
                            outputs[*j].take().unwrap_or_else(|| out_clone_missing(*j))
                        }
                    })
                    .collect();
                if tx.send(captured).is_err() {
                    break;
                }
                count += 1;
                on_batch();
            }
            Ok(())
        })();
        drop(tx);
        let collected = handle
            .join()
            .map_err(|_| anyhow::anyhow!("the histogram thread panicked"))?;
        run?;
        collected
    })?;
    if count == 0 {
        bail!("no calibration batches");
    }
    Ok(Collected {
        histograms: names.into_iter().zip(hists).collect(),
        batches: count,
        model_time,
        histogram_time: busy,
        wall_time: started.elapsed(),
    })
}

/// An output requested twice cannot happen (capture de-duplicates names); an empty tensor
/// keeps the types simple if it ever does.
fn out_clone_missing(j: usize) -> HostTensor {
    HostTensor {
        name: format!("output {j}"),
        shape: vec![0],
        data: TensorData::F32(vec![]),
    }
}

/// The range of every tensor under `algo`, searched in parallel across tensors.
pub fn compute_ranges(histograms: &[(String, Histogram)], algo: Algorithm) -> Vec<TensorRange> {
    histograms
        .par_iter()
        .map(|(name, h)| {
            let amax = algo.amax(h);
            TensorRange {
                tensor: name.clone(),
                amax,
                scale: super::range::scale_of(amax),
                max_abs: h.max_abs(),
                count: h.total(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::batches::SyntheticBatches;
    use crate::onnx::rewrite::plan::plan_int8;
    use crate::onnx::test_models;

    #[test]
    fn collects_every_planned_tensor() {
        let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let plan = plan_int8(m.graph());
        let mut b = SyntheticBatches::new("input", &[3, 16, 16], 4, 12, 7).unwrap();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let c = collect(&m, &plan, &mut b, 4, &|| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(c.batches, 3);
        assert_eq!(calls.into_inner(), 3);
        assert_eq!(c.histograms[0].0, "input");
        assert_eq!(c.histograms[0].1.total(), 12 * 768);
        assert_eq!(c.histograms[1].0, "flat");
        assert_eq!(c.histograms[1].1.total(), 12 * 512);
        let r = compute_ranges(&c.histograms, Algorithm::MinMax);
        assert!(r[0].amax > 3.0 && r[0].amax < 6.0, "{:?}", r[0]);
        assert!(r[1].amax > 0.0);
    }
}
