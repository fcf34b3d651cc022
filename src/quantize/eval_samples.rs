//! The samples the INT8 triage tunes on and those it checks on. Every sample of `--eval-data`
//! counts, up to `--eval-samples` (a short last batch is padded when run, never dropped). They
//! are split by a seeded shuffle of their files into a tuning part and a check part (about 3:1
//! by default; every sample of a file on one side, [`crate::quantize::check_split`]; single
//! samples where they are all in one file), or the check part is a separate source
//! (`--check-data`). Which files the two parts share is reported. Everything that fits the INT8 model to
//! data (the activation scale search, bias correction, adaptive rounding, the choice of float
//! nodes) sees only the tuning part; whether a target is met is decided on the check part.

use crate::backend::batch_runner::join;
use crate::calibration::request::{open_samples, CalibrateConfig};
use crate::calibration::sample_source::CalibrationBatches;
use crate::data::batch_axis::{select_rows, slice_padded};
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::shape::InputShapes;
use crate::onnx::OnnxModel;
use crate::quantize::check_split::{files_of, split_by_file, CheckOrigin, SplitKind};
use crate::quantize::eval_config::{CheckSet, EvalConfig, DEFAULT_EVAL_SAMPLES};
use crate::tensor::HostTensor;
use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::path::PathBuf;

/// The evaluation samples, read and split.
pub(crate) struct EvalSamples {
    /// The tuning part: one tensor per model input, samples along axis 0.
    pub tune: Vec<HostTensor>,
    /// The check part (empty with [`CheckSet::Off`]).
    pub check: Vec<HostTensor>,
    /// Samples in the tuning part.
    pub(crate) tune_count: usize,
    /// Samples in the check part.
    pub(crate) check_count: usize,
    /// Samples the sources had beyond `--eval-samples` (left out).
    pub left_out: usize,
    /// How the check part was chosen and which files it shares with the tuning part.
    pub(crate) origin: CheckOrigin,
}

/// All the samples of a source: one tensor per input, how many, how many the limit left out,
/// and the files they come from with their samples each.
struct AllSamples {
    inputs: Vec<HostTensor>,
    count: usize,
    left_out: usize,
    files: Vec<(PathBuf, usize)>,
}

/// Which of the two sources is read: it names the source in an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SourceRole {
    /// `--eval-data`.
    Eval,
    /// `--check-data`.
    Check,
}

/// The samples of `source` for `model` as `config` reads them (sizes from `--input-shape` /
/// `--dim`, the sample limit, the batch size, the preprocessing).
pub(crate) fn open_source(
    model: &OnnxModel,
    config: &EvalConfig,
    source: &str,
    role: SourceRole,
) -> Result<Box<dyn CalibrationBatches>> {
    // Samples are made at the sizes `--input-shape`/`--dim` fix (a token model's `seq`).
    let shaped;
    let model = if config.backend.input_shapes.is_empty() {
        model
    } else {
        shaped = InputShapes(config.backend.input_shapes.clone())
            .run(model.clone())
            .with_context(|| config.model.display().to_string())?
            .0;
        &shaped
    };
    open_samples(
        model,
        &CalibrateConfig {
            model: config.model.clone(),
            calib_data: source.to_string(),
            batch_size: config.batch_size,
            num_images: Some(config.samples.unwrap_or(DEFAULT_EVAL_SAMPLES)),
            algorithms: vec![],
            recalibrate: false,
            cache_dir: PathBuf::new(),
            measure_plain: false,
            backend: Default::default(),
            preprocess: config.preprocess.clone(),
        },
    )
    .with_context(|| match role {
        SourceRole::Eval => format!("evaluation data {source}"),
        SourceRole::Check => format!("check data {source}"),
    })
}

/// What identifies the samples and their split, for the key of a kept search result.
pub(crate) fn samples_fingerprint(model: &OnnxModel, config: &EvalConfig) -> Result<String> {
    let eval = open_source(model, config, &config.eval_data, SourceRole::Eval)?;
    let mut print = format!(
        "{} {} check: {:?}",
        eval.fingerprint(),
        eval.preprocessing(),
        config.check
    );
    if let CheckSet::Data(source) = &config.check {
        print += &open_source(model, config, source, SourceRole::Check)?.fingerprint();
    }
    Ok(print)
}

/// All the samples of a source.
fn read_all(batches: Box<dyn CalibrationBatches>) -> Result<AllSamples> {
    let left_out = batches.summary().available - batches.image_count();
    let files = batches.summary().files.clone();
    let parts: Vec<Vec<HostTensor>> = batches.collect::<Result<_>>()?;
    let joined = join(parts)?;
    let count = joined.first().and_then(|t| t.shape.first()).copied();
    Ok(AllSamples {
        inputs: joined,
        count: count.unwrap_or(0),
        left_out,
        files,
    })
}

/// The tuning and check indices of `n` samples: a shuffle seeded by `seed`, `fraction` of
/// them (rounded, at least one, leaving at least one) for the check; both sorted.
pub(crate) fn split_indices(n: usize, fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    let check = ((n as f64 * fraction).round() as usize).clamp(1, n.saturating_sub(1));
    let (mut c, mut t) = (order[..check].to_vec(), order[check..].to_vec());
    c.sort_unstable();
    t.sort_unstable();
    (t, c)
}

/// Reads the samples `config` names and splits them as its check set says.
pub(crate) fn read_eval_samples(model: &OnnxModel, config: &EvalConfig) -> Result<EvalSamples> {
    let all = read_all(open_source(
        model,
        config,
        &config.eval_data,
        SourceRole::Eval,
    )?)?;
    let n = all.count;
    if n == 0 {
        bail!("evaluation data {}: no samples", config.eval_data);
    }
    let (tune, check, check_left, origin) = match &config.check {
        CheckSet::Off => (all.inputs, vec![], 0, CheckOrigin::default()),
        CheckSet::Data(source) => {
            let check = read_all(open_source(model, config, source, SourceRole::Check)?)?;
            let origin = CheckOrigin::of(SplitKind::Separate, &all.files, &check.files);
            (all.inputs, check.inputs, check.left_out, origin)
        }
        CheckSet::Split { fraction, seed } => {
            if n < 2 {
                bail!(
                    "evaluation data {}: 1 sample cannot be split into a tuning and a check part; give more samples, a separate --check-data, or --check-fraction 0",
                    config.eval_data
                );
            }
            let rows: Vec<usize> = all.files.iter().map(|f| f.1).collect();
            let by_file = split_by_file(&rows, *fraction, *seed);
            let kind = match by_file {
                Some(_) => SplitKind::ByFile,
                None => SplitKind::BySample,
            };
            let (t, c) = by_file.unwrap_or_else(|| split_indices(n, *fraction, *seed));
            let origin =
                CheckOrigin::of(kind, &files_of(&all.files, &t), &files_of(&all.files, &c));
            let pick = |rows: &[usize]| -> Result<Vec<HostTensor>> {
                all.inputs.iter().map(|x| select_rows(x, rows)).collect()
            };
            (pick(&t)?, pick(&c)?, 0, origin)
        }
    };
    let count = |inputs: &[HostTensor]| {
        inputs
            .first()
            .and_then(|t| t.shape.first())
            .copied()
            .unwrap_or(0)
    };
    Ok(EvalSamples {
        tune_count: count(&tune),
        check_count: count(&check),
        tune,
        check,
        left_out: all.left_out + check_left,
        origin,
    })
}

/// `inputs` cut into batches of at most `batch` samples along axis 0 (the last one short).
pub(crate) fn batches_of(inputs: &[HostTensor], batch: usize) -> Result<Vec<Vec<HostTensor>>> {
    let n = inputs
        .first()
        .and_then(|t| t.shape.first())
        .copied()
        .unwrap_or(0);
    (0..n)
        .step_by(batch.max(1))
        .map(|start| {
            inputs
                .iter()
                .map(|t| slice_padded(t, start, batch.min(n - start)))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_is_seeded_disjoint_and_covers_every_sample() {
        let (t, c) = split_indices(11, 0.25, 0);
        assert_eq!((t.len(), c.len()), (8, 3));
        let mut all: Vec<usize> = t.iter().chain(&c).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..11).collect::<Vec<_>>());
        assert_eq!(split_indices(11, 0.25, 0), (t.clone(), c.clone()));
        assert_ne!(
            split_indices(11, 0.25, 1).1,
            c,
            "another seed, another split"
        );
        // At least one sample on each side.
        assert_eq!(split_indices(2, 0.01, 0).1.len(), 1);
        assert_eq!(split_indices(2, 0.99, 0).0.len(), 1);
    }

    #[test]
    fn batches_keep_every_sample() {
        let x = HostTensor::new(
            "x",
            vec![11, 1],
            crate::tensor::TensorData::F32((0..11).map(|v| v as f32).collect()),
        )
        .unwrap();
        let b = batches_of(std::slice::from_ref(&x), 8).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!((b[0][0].shape[0], b[1][0].shape[0]), (8, 3));
    }
}
