//! The parallel loader: reads, decodes and preprocesses images on rayon's pool, in dataset
//! order, and hands out ready batches through a bounded queue so that decoding overlaps
//! inference. An image that cannot be read or decoded is reported and skipped; the run goes on.

use super::dataset::Sample;
use super::preprocess::Preprocess;
use anyhow::{Context, Result};
use rayon::prelude::*;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

/// An image that was skipped, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    /// The image file.
    pub path: PathBuf,
    /// What went wrong (one line).
    pub reason: String,
}

/// A batch of preprocessed images, in dataset order.
#[derive(Debug)]
pub struct Batch {
    /// The samples that made it into `data`, in order.
    pub samples: Vec<Sample>,
    /// `samples.len() * preprocess.elements()` floats, one image after the other.
    pub data: Vec<f32>,
    /// Images of this batch's share of the dataset that were skipped.
    pub failures: Vec<Failure>,
}

/// Reads, decodes and preprocesses one image into `out`.
pub fn load_one(path: &std::path::Path, pre: &Preprocess, out: &mut [f32]) -> Result<()> {
    let bytes = std::fs::read(path).context("cannot read the file")?;
    pre.apply_encoded(&bytes, out)
}

fn load_group(samples: &[Sample], pre: &Preprocess) -> (Vec<f32>, Vec<Option<Failure>>) {
    let n = pre.elements();
    let mut data = vec![0f32; samples.len() * n];
    let failures: Vec<Option<Failure>> = data
        .par_chunks_mut(n)
        .zip(samples.par_iter())
        .map(|(out, s)| {
            load_one(&s.path, pre, out).err().map(|e| Failure {
                path: s.path.clone(),
                reason: format!("{e:#}").replace('\n', " "),
            })
        })
        .collect();
    (data, failures)
}

/// Splits one decoded group into batches of the samples' original grouping, dropping failures.
fn into_batch(samples: &[Sample], data: &[f32], failed: &[Option<Failure>], n: usize) -> Batch {
    let mut batch = Batch {
        samples: Vec::with_capacity(samples.len()),
        data: Vec::with_capacity(data.len()),
        failures: Vec::new(),
    };
    for ((s, img), f) in samples.iter().zip(data.chunks_exact(n)).zip(failed) {
        match f {
            Some(f) => batch.failures.push(f.clone()),
            None => {
                batch.samples.push(s.clone());
                batch.data.extend_from_slice(img);
            }
        }
    }
    batch
}

/// Yields batches of preprocessed images while the next ones are being prepared.
pub struct Loader {
    rx: Option<Receiver<Batch>>,
    worker: Option<JoinHandle<()>>,
}

impl Loader {
    /// Starts loading `samples` in batches of `batch_size`, keeping at most `prefetch` batches
    /// ready ahead of the consumer. Decoding runs on rayon's global pool, several batches' worth
    /// at a time when batches are smaller than the pool.
    pub fn spawn(
        samples: Vec<Sample>,
        pre: Preprocess,
        batch_size: usize,
        prefetch: usize,
    ) -> Result<Self> {
        let batch_size = batch_size.max(1);
        let (tx, rx) = sync_channel(prefetch.max(1));
        let threads = rayon::current_num_threads();
        let batches_per_group = (2 * threads).div_ceil(batch_size).max(1);
        let worker = std::thread::Builder::new()
            .name("trtkit-loader".into())
            .spawn(move || {
                let n = pre.elements();
                for group in samples.chunks(batch_size * batches_per_group) {
                    let (data, failed) = load_group(group, &pre);
                    for (i, chunk) in group.chunks(batch_size).enumerate() {
                        let lo = i * batch_size;
                        let hi = lo + chunk.len();
                        let batch = into_batch(chunk, &data[lo * n..hi * n], &failed[lo..hi], n);
                        if tx.send(batch).is_err() {
                            return; // the consumer stopped
                        }
                    }
                }
            })
            .context("cannot start the loader thread")?;
        Ok(Loader {
            rx: Some(rx),
            worker: Some(worker),
        })
    }
}

impl Iterator for Loader {
    type Item = Batch;

    fn next(&mut self) -> Option<Batch> {
        self.rx.as_ref()?.recv().ok()
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.rx = None; // unblocks the worker's send
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_png(path: &std::path::Path, w: u32, h: u32, rgb: [u8; 3]) {
        let data: Vec<u8> = (0..w * h).flat_map(|_| rgb).collect();
        let file = std::fs::File::create(path).unwrap();
        let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.write_header().unwrap().write_image_data(&data).unwrap();
    }

    #[test]
    fn batches_keep_order_and_skip_bad_images() {
        let d = tempfile::tempdir().unwrap();
        let mut samples = Vec::new();
        for i in 0..7usize {
            let path = d.path().join(format!("{i}.png"));
            if i == 3 {
                std::fs::write(&path, b"not an image").unwrap();
            } else {
                write_png(&path, 6, 4, [i as u8 * 10, 0, 0]);
            }
            samples.push(Sample { path, label: i });
        }
        samples.push(Sample {
            path: d.path().join("missing.png"),
            label: 99,
        });
        let pre = Preprocess {
            resize: Some(4),
            crop: (4, 4),
            ..Preprocess::imagenet().unnormalized()
        };
        let batches: Vec<Batch> = Loader::spawn(samples, pre, 3, 1).unwrap().collect();
        assert_eq!(batches.len(), 3);
        let labels: Vec<Vec<usize>> = batches
            .iter()
            .map(|b| b.samples.iter().map(|s| s.label).collect())
            .collect();
        assert_eq!(labels, vec![vec![0, 1, 2], vec![4, 5], vec![6]]);
        assert_eq!(batches[1].data.len(), 2 * 48);
        // First element of image 4 is red 40/255.
        assert!((batches[1].data[0] - 40.0 / 255.0).abs() < 1e-6);
        assert_eq!(batches[1].failures.len(), 1);
        assert!(batches[1].failures[0].reason.contains("not a JPEG or PNG"));
        assert!(batches[2].failures[0]
            .reason
            .contains("cannot read the file"));
        assert!(batches[2].failures[0].path.ends_with("missing.png"));
    }

    #[test]
    fn dropping_early_stops_the_worker() {
        let samples: Vec<Sample> = (0..100)
            .map(|i| Sample {
                path: PathBuf::from(format!("/nonexistent/{i}.jpg")),
                label: 0,
            })
            .collect();
        let mut loader = Loader::spawn(samples, Preprocess::imagenet(), 2, 1).unwrap();
        assert!(loader.next().is_some());
        drop(loader); // must not hang
    }
}
