//! Calibration batches from a folder of images (JPEG/PNG, any sub-folder layout), decoded and
//! preprocessed by the dataset loader with the model's preprocessing.

use crate::calibration::sample_source::{
    batch_tensor, take_front, usable, CalibrationBatches, SourceSummary,
};
use crate::data::dataset::Sample;
use crate::data::loader::{HostBatch, Loader};
use crate::data::preprocess::PreprocessRequest;
use crate::data::walk::walk;
use crate::digest::Sha256Stream;
use crate::tensor::{ElemType, HostTensor};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Batches to keep decoded ahead of the model.
const PREFETCH: usize = 2;

/// True when `dir` holds at least one image file, by the folder walk's rule
/// ([`crate::data::walk`]).
pub(crate) fn has_images(dir: &Path) -> bool {
    walk(dir).is_ok_and(|w| !w.files.is_empty())
}

/// The images under `dir` by the folder walk's rule (any depth, sorted by name within each
/// folder, depth first: for a flat folder, the files sorted by name); each skip is logged.
fn image_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let walked = walk(dir)?;
    for f in &walked.skipped {
        tracing::warn!("skipped {}: {}", f.path.display(), f.reason);
    }
    Ok(walked.files)
}

/// Batches of preprocessed images for one model input.
pub(crate) struct ImageBatches {
    loader: Loader<HostBatch>,
    pending: Vec<f32>,
    input: String,
    sample_shape: Vec<usize>,
    done: usize,
    facts: SourceSummary,
}

impl ImageBatches {
    /// Lists the images under `dir` (sorted), keeps the first `limit` (the last batch holds what
    /// is left), and
    /// starts decoding them for input `input` with samples of `sample_shape`, preprocessed as
    /// `request` says (resolved against the input; defaults: the ImageNet evaluation
    /// transform scaled to the crop).
    pub fn open(
        dir: &Path,
        input: &str,
        sample_shape: &[usize],
        batch: usize,
        limit: Option<usize>,
        request: &PreprocessRequest,
    ) -> Result<Self> {
        let shown = dir.display().to_string();
        let pre = request
            .resolve_for_sample(input, sample_shape)
            .with_context(|| format!("{shown}: cannot calibrate from images"))?;
        let mut files = image_files(dir)?;
        if files.is_empty() {
            bail!("{shown}: no JPEG or PNG images in the folder");
        }
        let available = files.len();
        let used = usable(&shown, available, limit, batch)?;
        files.truncate(used);
        let mut hasher = Sha256Stream::new();
        for f in &files {
            hasher.update(
                f.strip_prefix(dir)
                    .unwrap_or(f)
                    .as_os_str()
                    .as_encoded_bytes(),
            );
            hasher
                .update(std::fs::read(f).with_context(|| format!("{}: cannot read", f.display()))?);
        }
        let preprocessing = serde_json::to_string(&pre)?;
        let one_each: Vec<(PathBuf, usize)> = files.iter().map(|f| (f.clone(), 1)).collect();
        let samples = files
            .into_iter()
            .map(|path| Sample { path, label: 0 })
            .collect();
        Ok(ImageBatches {
            loader: Loader::host(samples, pre, batch, PREFETCH, ElemType::F32)?,
            pending: Vec::new(),
            input: input.into(),
            sample_shape: sample_shape.to_vec(),
            done: 0,
            facts: SourceSummary::new(batch, used, available, hasher.finish_hex(), preprocessing)
                .with_files(one_each),
        })
    }
}

impl Iterator for ImageBatches {
    type Item = Result<Vec<HostTensor>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done == self.facts.batches {
            return None;
        }
        let rows = self.facts.rows(self.done);
        let per_sample = self.sample_shape.iter().product::<usize>();
        let need = rows * per_sample;
        while self.pending.len() < need {
            let Some(b) = self.loader.next() else {
                tracing::warn!(
                    "skipped images left {} of {} batches; calibrating on the images that decoded",
                    self.done,
                    self.facts.batches
                );
                self.done = self.facts.batches;
                return None;
            };
            for f in &b.failures {
                tracing::warn!("skipped {}: {}", f.path.display(), f.reason);
            }
            let rows = b.samples.len() * per_sample;
            self.pending
                .extend_from_slice(&b.memory().data().as_f32()[..rows]);
        }
        let data = take_front(&mut self.pending, need);
        self.done += 1;
        Some(batch_tensor(&self.input, rows, &self.sample_shape, data).map(|t| vec![t]))
    }
}

impl CalibrationBatches for ImageBatches {
    fn summary(&self) -> &SourceSummary {
        &self.facts
    }
    fn decodes_images(&self) -> bool {
        true
    }
}
