//! Where calibration batches come from: a small seam any data source plugs into.
//!
//! Here: numpy arrays — a folder of `.npy`/`.npz` files, or one such file — each one sample
//! `[C,H,W]` or a stack `[n,C,H,W]`, already preprocessed; and seeded synthetic data for
//! tests and timing. The ImageFolder loader with the model's preprocessing
//! (`image_source`) implements the same trait.

use crate::data::npz;
use crate::digest::Sha256Stream;
use crate::error::{fix_with, Setting};
use crate::tensor::{HostTensor, TensorData};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// A finite sequence of input batches for calibration (each one tensor per model input, in the
/// model's order), with what identifies it for the cache.
pub trait CalibrationBatches: Iterator<Item = Result<Vec<HostTensor>>> + Send {
    /// What the source knows of itself before yielding anything.
    fn summary(&self) -> &SourceSummary;
    /// Batches the iterator will yield in all.
    fn batch_count(&self) -> usize {
        self.summary().batches
    }
    /// Samples (images) those batches hold: the last batch may hold fewer than the others.
    fn image_count(&self) -> usize {
        self.summary().samples
    }
    /// A fingerprint of the data (changes when any sample changes).
    fn fingerprint(&self) -> String {
        self.summary().fingerprint.clone()
    }
    /// How the samples were made from the source (the preprocessing), for the cache key.
    fn preprocessing(&self) -> String {
        self.summary().preprocessing.clone()
    }
    /// Whether the batches are decoded from images on rayon's pool while the model runs (the
    /// loader then shares the CPU's cores with a CPU backend).
    fn decodes_images(&self) -> bool {
        false
    }
}

/// What a calibration source knows of itself: its batches and what identifies its samples.
#[derive(Clone, Debug)]
pub struct SourceSummary {
    /// Samples per batch (the last batch may hold fewer).
    pub batch: usize,
    /// Batches in all.
    pub batches: usize,
    /// Samples the batches hold.
    pub samples: usize,
    /// Samples the source has (more than `samples` when a limit left some out).
    pub available: usize,
    /// A fingerprint of the data.
    pub fingerprint: String,
    /// How the samples were made from the source.
    pub preprocessing: String,
    /// The files the used samples come from, in reading order, with how many samples each
    /// gives (empty where the source has no files, as synthetic data).
    pub(crate) files: Vec<(PathBuf, usize)>,
}

impl SourceSummary {
    /// The summary of `samples` of `available` samples in batches of `batch` (the last one
    /// short when `batch` does not divide `samples`).
    pub(crate) fn new(
        batch: usize,
        samples: usize,
        available: usize,
        fingerprint: String,
        preprocessing: String,
    ) -> SourceSummary {
        SourceSummary {
            batch,
            batches: samples.div_ceil(batch.max(1)),
            samples,
            available,
            fingerprint,
            preprocessing,
            files: vec![],
        }
    }

    /// The summary with the files its samples come from: `files` with the samples each has,
    /// cut to the samples used.
    pub(crate) fn with_files(mut self, files: impl IntoIterator<Item = (PathBuf, usize)>) -> Self {
        let mut left = self.samples;
        for (path, rows) in files {
            if left == 0 {
                break;
            }
            let taken = rows.min(left);
            left -= taken;
            self.files.push((path, taken));
        }
        self
    }

    /// The samples batch `index` holds: `batch`, or fewer in the last one.
    pub fn rows(&self, index: usize) -> usize {
        self.samples
            .saturating_sub(index * self.batch)
            .min(self.batch)
    }
}

/// How many samples to use: all, or the first `limit`; every one counts (the last batch is
/// short when the batch size does not divide them). Errors when there are none.
/// Feeds one array file to the fingerprint of its folder: its name, then its bytes.
pub(crate) fn fingerprint_file(hash: &mut Sha256Stream, file: &Path, bytes: &[u8]) {
    hash.update(file.file_name().unwrap_or_default().as_encoded_bytes());
    hash.update(bytes);
}

/// The summary of a source of array files whose `available` samples `hash` was fed
/// ([`fingerprint_file`]): the first `limit` of them used (the limit is part of the fingerprint)
/// in batches of `batch`, fed as `preprocessing` says.
pub(crate) fn arrays_summary(
    shown: &str,
    mut hash: Sha256Stream,
    available: usize,
    limit: Option<usize>,
    batch: usize,
    preprocessing: &str,
) -> Result<SourceSummary> {
    let used = usable(shown, available, limit, batch)?;
    if let Some(k) = limit {
        hash.update(format!("first {k}").as_bytes());
    }
    Ok(SourceSummary::new(
        batch,
        used,
        available,
        hash.finish_hex(),
        preprocessing.into(),
    ))
}

pub(crate) fn usable(
    source: &str,
    available: usize,
    limit: Option<usize>,
    batch: usize,
) -> Result<usize> {
    if batch == 0 {
        return Err(fix_with(
            Setting::BatchSize,
            format!("{source}: the batch size must be at least 1"),
        ));
    }
    let n = limit.map_or(available, |k| k.min(available));
    if n == 0 {
        bail!("{source}: no samples to use");
    }
    Ok(n)
}

/// One batch of `sample_shape` samples for input `input`, from its flat values.
pub(crate) fn batch_tensor(
    input: &str,
    batch: usize,
    sample_shape: &[usize],
    data: Vec<f32>,
) -> Result<HostTensor> {
    let mut shape = vec![batch];
    shape.extend(sample_shape);
    HostTensor::new(input, shape, TensorData::F32(data))
}

/// Splits the first `n` values off `pending` (which keeps the rest).
pub(crate) fn take_front(pending: &mut Vec<f32>, n: usize) -> Vec<f32> {
    let rest = pending.split_off(n);
    std::mem::replace(pending, rest)
}

/// Batches from numpy files: a folder of `.npy`/`.npz` files (in name order) or a single one.
/// An `.npz` gives the array named after the model input, or its only array.
pub(crate) struct ArrayBatches {
    files: Vec<PathBuf>,
    next_file: usize,
    pending: Vec<f32>,
    input: String,
    sample_shape: Vec<usize>,
    batches_left: usize,
    facts: SourceSummary,
}

fn is_array_file(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "npy" || e == "npz")
}

/// The files a source path names: the files of a folder that `wanted` keeps, in name order
/// (none is an error saying `none_found`), or the one file it is.
pub(crate) fn source_files(
    path: &Path,
    wanted: fn(&Path) -> bool,
    none_found: &str,
) -> Result<Vec<PathBuf>> {
    let shown = path.display();
    if path.is_dir() {
        let mut f: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("{shown}: cannot list the folder"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| wanted(p))
            .collect();
        f.sort();
        if f.is_empty() {
            bail!("{shown}: {none_found}");
        }
        Ok(f)
    } else if path.is_file() {
        Ok(vec![path.to_path_buf()])
    } else {
        bail!("{shown}: no such file or folder");
    }
}

/// Reads a numpy file's bytes, naming the file when it cannot.
fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))
}

/// The float values and shape of the array a numpy file (its `bytes`) holds for `input`.
fn array_for(path: &Path, bytes: &[u8], input: &str) -> Result<(Vec<usize>, Vec<f32>)> {
    let shown = path.display();
    let mut arrays = npz::load_bytes(path, bytes)?;
    let at = match arrays.iter().position(|a| a.name == input) {
        Some(i) => i,
        None if arrays.len() == 1 => 0,
        None => {
            let names: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
            bail!(
                "{shown}: holds arrays {}; none is named after the model input '{input}'",
                names.join(", ")
            );
        }
    };
    let a = arrays.swap_remove(at);
    let values = match a.data {
        TensorData::F32(v) => v,
        TensorData::F64(v) => v.into_iter().map(|x| x as f32).collect(),
        TensorData::F16(v) => v.into_iter().map(f32::from).collect(),
        other => bail!(
            "{shown}: array '{}' is {}, not floating point",
            a.name,
            other.elem_type()
        ),
    };
    Ok((a.shape, values))
}

impl ArrayBatches {
    /// Opens `path` for input `input` whose samples have dims `sample_shape` (without batch).
    pub fn open(
        path: &Path,
        input: &str,
        sample_shape: &[usize],
        batch: usize,
        limit: Option<usize>,
    ) -> Result<Self> {
        let shown = path.display().to_string();
        let files = source_files(path, is_array_file, "no .npy or .npz files in the folder")?;
        let mut available = 0usize;
        let mut rows = Vec::with_capacity(files.len());
        let mut hasher = Sha256Stream::new();
        for f in &files {
            let bytes = read_file(f)?;
            let (shape, _) = array_for(f, &bytes, input)?;
            let n = if shape == sample_shape {
                1
            } else if shape.len() == sample_shape.len() + 1 && shape[1..] == *sample_shape {
                shape[0]
            } else {
                bail!(
                    "{}: array shape {:?} does not fit the model input '{input}' (one sample {:?} or a stack [n, ...] of them)",
                    f.display(),
                    shape,
                    sample_shape
                );
            };
            available += n;
            rows.push((f.clone(), n));
            fingerprint_file(&mut hasher, f, &bytes);
        }
        let facts = arrays_summary(
            &shown,
            hasher,
            available,
            limit,
            batch,
            "none (numpy arrays fed as stored)",
        )?
        .with_files(rows);
        Ok(ArrayBatches {
            files,
            next_file: 0,
            pending: Vec::new(),
            input: input.to_string(),
            sample_shape: sample_shape.to_vec(),
            batches_left: facts.batches,
            facts,
        })
    }
}

impl Iterator for ArrayBatches {
    type Item = Result<Vec<HostTensor>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.batches_left == 0 {
            return None;
        }
        let rows = self.facts.rows(self.facts.batches - self.batches_left);
        let need = rows * self.sample_shape.iter().product::<usize>();
        while self.pending.len() < need && self.next_file < self.files.len() {
            let path = &self.files[self.next_file];
            match read_file(path).and_then(|bytes| array_for(path, &bytes, &self.input)) {
                Ok((_, v)) => self.pending.extend(v),
                Err(e) => {
                    self.batches_left = 0;
                    return Some(Err(e));
                }
            }
            self.next_file += 1;
        }
        if self.pending.len() < need {
            self.batches_left = 0;
            return Some(Err(anyhow::anyhow!(
                "the calibration arrays changed while reading them"
            )));
        }
        let data = take_front(&mut self.pending, need);
        self.batches_left -= 1;
        Some(batch_tensor(&self.input, rows, &self.sample_shape, data).map(|t| vec![t]))
    }
}

impl CalibrationBatches for ArrayBatches {
    fn summary(&self) -> &SourceSummary {
        &self.facts
    }
}

/// Seeded samples from N(0, 1), for tests and timing runs.
pub(crate) struct SyntheticBatches {
    input: String,
    sample_shape: Vec<usize>,
    done: usize,
    seed: u64,
    facts: SourceSummary,
}

impl SyntheticBatches {
    /// `images` samples of `sample_shape` for input `input`, from `seed`.
    pub fn new(
        input: &str,
        sample_shape: &[usize],
        batch: usize,
        images: usize,
        seed: u64,
    ) -> Result<Self> {
        let used = usable(
            &format!("synthetic data (seed {seed})"),
            images,
            None,
            batch,
        )?;
        Ok(SyntheticBatches {
            input: input.into(),
            sample_shape: sample_shape.to_vec(),
            done: 0,
            seed,
            facts: SourceSummary::new(
                batch,
                used,
                images,
                format!("synthetic-normal seed={seed} shape={sample_shape:?}"),
                "none (synthetic N(0,1))".into(),
            ),
        })
    }
}

/// Seeded standard-normal values (Box–Muller over a 64-bit LCG), deterministic per stream.
pub fn normal_values(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut unit = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let (u, v) = (unit(), unit());
            ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
        })
        .collect()
}

impl Iterator for SyntheticBatches {
    type Item = Result<Vec<HostTensor>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done == self.facts.batches {
            return None;
        }
        let rows = self.facts.rows(self.done);
        let n = rows * self.sample_shape.iter().product::<usize>();
        let data = normal_values(self.seed.wrapping_add(self.done as u64 * 7919), n);
        self.done += 1;
        Some(batch_tensor(&self.input, rows, &self.sample_shape, data).map(|t| vec![t]))
    }
}

impl CalibrationBatches for SyntheticBatches {
    fn summary(&self) -> &SourceSummary {
        &self.facts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, shape: &[usize], values: &[f32]) {
        let t = HostTensor::new("x", shape.to_vec(), TensorData::F32(values.to_vec())).unwrap();
        std::fs::write(path, crate::data::npy::encode(&t)).unwrap();
    }

    #[test]
    fn npy_folder_in_batches_across_files() {
        let dir = tempfile::tempdir().unwrap();
        // 3 samples in one stack + 2 single samples = 5 → 2 batches of 2 and one of 1.
        write(
            &dir.path().join("a.npy"),
            &[3, 2],
            &[0., 1., 2., 3., 4., 5.],
        );
        write(&dir.path().join("b.npy"), &[2], &[6., 7.]);
        write(&dir.path().join("c.npy"), &[2], &[8., 9.]);
        let b = ArrayBatches::open(dir.path(), "x", &[2], 2, None).unwrap();
        assert_eq!((b.batch_count(), b.image_count()), (3, 5));
        let fp = b.fingerprint();
        let all: Vec<HostTensor> = b.map(|b| b.unwrap().remove(0)).collect();
        assert_eq!(all[1].data, TensorData::F32(vec![4., 5., 6., 7.]));
        assert_eq!(all[1].shape, vec![2, 2]);
        assert_eq!(all[2].data, TensorData::F32(vec![8., 9.]));
        assert_eq!(all[2].shape, vec![1, 2]);
        write(&dir.path().join("c.npy"), &[2], &[8., 9.5]);
        let b = ArrayBatches::open(dir.path(), "x", &[2], 2, None).unwrap();
        assert_ne!(b.fingerprint(), fp);
        let one = ArrayBatches::open(dir.path(), "x", &[2], 8, None).unwrap();
        assert_eq!(
            (one.batch_count(), one.image_count()),
            (1, 5),
            "fewer than a batch"
        );
        let err = ArrayBatches::open(dir.path(), "x", &[3], 1, None)
            .err()
            .unwrap();
        assert!(err.to_string().contains("a.npy"), "{err}");
    }

    #[test]
    fn npz_gives_the_array_named_after_the_input() {
        let dir = tempfile::tempdir().unwrap();
        let t = |name: &str, v: Vec<f32>| {
            HostTensor::new(name, vec![v.len() / 2, 2], TensorData::F32(v)).unwrap()
        };
        let path = dir.path().join("calib.npz");
        npz::save(
            &path,
            &[t("other", vec![9.; 4]), t("input", vec![1., 2., 3., 4.])],
        )
        .unwrap();
        let all: Vec<HostTensor> = ArrayBatches::open(&path, "input", &[2], 2, None)
            .unwrap()
            .map(|b| b.unwrap().remove(0))
            .collect();
        assert_eq!(all, vec![t("input", vec![1., 2., 3., 4.])]);
        let err = ArrayBatches::open(&path, "image", &[2], 1, None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("calib.npz") && err.contains("other, input") && err.contains("'image'"),
            "{err}"
        );
        // A single-array archive needs no matching name; float64 is narrowed.
        let one = dir.path().join("one.npz");
        let f64s = HostTensor::new("arr_0", vec![2], TensorData::F64(vec![0.5, 1.5])).unwrap();
        npz::save(&one, &[f64s]).unwrap();
        let got: Vec<HostTensor> = ArrayBatches::open(&one, "input", &[2], 1, None)
            .unwrap()
            .map(|b| b.unwrap().remove(0))
            .collect();
        assert_eq!(got[0].data, TensorData::F32(vec![0.5, 1.5]));
    }

    #[test]
    fn synthetic_is_seeded() {
        let a: Vec<_> = SyntheticBatches::new("x", &[4], 2, 5, 1)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let b: Vec<_> = SyntheticBatches::new("x", &[4], 2, 5, 1)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(a.len(), 3, "5 samples at batch 2: the last batch holds 1");
        assert_eq!(a[2][0].shape, vec![1, 4]);
        assert_eq!(a, b);
        assert_ne!(a[0], a[1]);
    }
}
