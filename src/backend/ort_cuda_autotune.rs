//! The layout and fusion ONNX Runtime's CUDA provider runs a model with, measured once per
//! model, batch, GPU, ONNX Runtime version and cuDNN settings, and kept in trtkit's cache
//! folder: every later command and bench cell on the same model and batch opens it the fast way
//! at once. What ONNX Runtime's own cuDNN search finds stays inside its session (it has no
//! cache to keep it in), so each session still pays its first inference.

use super::ort_cuda_tuning::{Candidate, ConvAlgoSearch, CudnnWorkspace};
use crate::atomic_file::write_atomic;
use crate::digest::sha256_hex;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Environment variable naming trtkit's cache folder (default `$XDG_CACHE_HOME/trtkit`, else
/// `~/.cache/trtkit`).
pub(crate) const CACHE_ENV: &str = "TRTKIT_CACHE_DIR";

/// Everything a measurement depends on: a record answers only the same key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TuningKey {
    /// SHA-256 of the model as ONNX Runtime opens it (batch and shapes fixed).
    pub model_sha256: String,
    /// The batch measured.
    pub batch: usize,
    /// The GPU's name.
    pub gpu: String,
    /// ONNX Runtime's version.
    pub onnxruntime: String,
    /// cuDNN's algorithm search.
    pub(crate) conv_search: ConvAlgoSearch,
    /// cuDNN's workspace limit.
    pub(crate) max_workspace: bool,
    /// The candidates measured.
    pub(crate) candidates: Vec<Candidate>,
}

impl TuningKey {
    /// The key of `model_bytes` at `batch` on `gpu`.
    pub fn new(
        model_bytes: &[u8],
        batch: usize,
        gpu: &str,
        onnxruntime: &str,
        (conv_search, workspace): (ConvAlgoSearch, CudnnWorkspace),
        candidates: &[Candidate],
    ) -> TuningKey {
        TuningKey {
            model_sha256: sha256_hex(model_bytes),
            batch,
            gpu: gpu.into(),
            onnxruntime: onnxruntime.into(),
            conv_search,
            max_workspace: workspace == CudnnWorkspace::Max,
            candidates: candidates.to_vec(),
        }
    }

    /// The record's file name: a digest of the whole key.
    fn file_name(&self) -> String {
        let text = serde_json::to_string(self).expect("a tuning key serializes");
        format!("{}.json", &sha256_hex(text.as_bytes())[..20])
    }
}

/// How much later than the soonest a candidate may finish a fixed amount of work and still
/// be taken for being faster per batch ([`TuningRecord::soonest`]).
const SOONEST_MARGIN: f64 = 0.1;

/// One candidate's measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Trial {
    /// The candidate.
    pub candidate: Candidate,
    /// Milliseconds per batch on the GPU clock, when it ran.
    pub(crate) ms_per_batch: Option<f64>,
    /// Opening and first inference, seconds.
    pub setup_s: f64,
    /// Why it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A measurement kept in the cache: its key, every trial, and the winner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct TuningRecord {
    /// What was measured.
    pub key: TuningKey,
    /// The fastest candidate.
    pub(crate) choice: Candidate,
    /// Every candidate's trial, in the order they ran.
    pub(crate) trials: Vec<Trial>,
}

impl TuningRecord {
    /// Runs `time` on every candidate of `key` and keeps the fastest; a candidate that fails
    /// is kept as a failed trial. Errors when none ran.
    pub fn measure(
        key: TuningKey,
        mut time: impl FnMut(Candidate) -> Result<(f64, f64)>,
    ) -> Result<TuningRecord> {
        let trials: Vec<Trial> = key
            .candidates
            .iter()
            .map(|&candidate| {
                let started = std::time::Instant::now();
                match time(candidate) {
                    Ok((ms_per_batch, setup_s)) => Trial {
                        candidate,
                        ms_per_batch: Some(ms_per_batch),
                        setup_s,
                        error: None,
                    },
                    Err(e) => Trial {
                        candidate,
                        ms_per_batch: None,
                        setup_s: started.elapsed().as_secs_f64(),
                        error: Some(first_line(&format!("{e:#}"))),
                    },
                }
            })
            .collect();
        let Some(choice) = trials
            .iter()
            .filter_map(|t| Some((t.candidate, t.ms_per_batch?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| c)
        else {
            let why: Vec<String> = trials
                .iter()
                .map(|t| format!("{}: {}", t.candidate, t.error.as_deref().unwrap_or("?")))
                .collect();
            bail!("no layout could be measured ({})", why.join("; "));
        };
        Ok(TuningRecord {
            key,
            choice,
            trials,
        })
    }

    /// The candidate that runs `batches` batches soonest, its measured set-up (opening and
    /// first inference) included, and why in words; `None` when no trial ran. A fused
    /// candidate's cuDNN compiles its kernels on the first inference, seconds that a short,
    /// fixed amount of work (a `validate` loader-bound at a few thousand images/s) may never earn
    /// back from its faster batches. The set-up figures are rough (the first candidate measured
    /// also pays the process's first use of cuDNN), so of the candidates within
    /// [`SOONEST_MARGIN`] of the soonest, the fastest per batch is taken.
    pub(crate) fn soonest(&self, batches: usize) -> Option<(Candidate, String)> {
        let total_s = |t: &Trial| Some(t.setup_s + batches as f64 * t.ms_per_batch? / 1e3);
        let soonest_s = self
            .trials
            .iter()
            .filter_map(total_s)
            .min_by(|a, b| a.total_cmp(b))?;
        let (best, best_s) = self
            .trials
            .iter()
            .filter_map(|t| Some((t, total_s(t)?, t.ms_per_batch?)))
            .filter(|(_, s, _)| *s <= soonest_s * (1.0 + SOONEST_MARGIN))
            .min_by(|a, b| a.2.total_cmp(&b.2))
            .map(|(t, s, _)| (t, s))?;
        let others: Vec<String> = self
            .trials
            .iter()
            .filter(|t| t.candidate != best.candidate)
            .filter_map(|t| Some(format!("{} {:.1} s", t.candidate, total_s(t)?)))
            .collect();
        let why = format!(
            "{batches} batches of {} take {best_s:.1} s with the set-up{} (of those within a tenth of the soonest, the fastest per batch)",
            self.key.batch,
            if others.is_empty() {
                String::new()
            } else {
                format!(", against {}", others.join(", "))
            }
        );
        Some((best.candidate, why))
    }

    /// The measurement in a few words: `NHWC, fused 14.6 ms, NHWC 21.7 ms, NCHW failed`.
    pub fn said(&self) -> String {
        let trials: Vec<String> = self
            .trials
            .iter()
            .map(|t| match t.ms_per_batch {
                Some(ms) => format!("{} {ms:.2} ms", t.candidate),
                None => format!("{} failed", t.candidate),
            })
            .collect();
        format!(
            "measured per batch of {} on {}: {}",
            self.key.batch,
            self.key.gpu,
            trials.join(", ")
        )
    }
}

/// The first line of `text`, at most 200 characters.
fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}

/// trtkit's folder of tuning records: `$TRTKIT_CACHE_DIR`, else `$XDG_CACHE_HOME/trtkit`, else
/// `~/.cache/trtkit`, each with `ort-cuda-tuning/` under it; `None` without any of them.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let root = var(CACHE_ENV)
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("trtkit")))
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache").join("trtkit")))?;
    Some(root.join("ort-cuda-tuning"))
}

/// The record of `key` in `dir`, if one was stored for exactly that key. A file that does not
/// read is logged and measured again.
pub fn lookup(dir: &Path, key: &TuningKey) -> Option<TuningRecord> {
    let path = dir.join(key.file_name());
    let bytes = std::fs::read(&path).ok()?;
    match serde_json::from_slice::<TuningRecord>(&bytes) {
        Ok(record) if record.key == *key => Some(record),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(
                "{}: not a tuning record ({e}); measuring again",
                path.display()
            );
            None
        }
    }
}

/// Stores `record` in `dir` (made if missing), atomically; returns the file.
pub(crate) fn store(dir: &Path, record: &TuningRecord) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let path = dir.join(record.key.file_name());
    write_atomic(&path, &serde_json::to_vec_pretty(record)?)
        .with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::anyhow;

    const NHWC_FUSED: Candidate = Candidate {
        nhwc: true,
        fused: true,
    };
    const NHWC: Candidate = Candidate {
        nhwc: true,
        fused: false,
    };
    const NCHW: Candidate = Candidate {
        nhwc: false,
        fused: false,
    };

    fn key(model: &[u8], batch: usize) -> TuningKey {
        TuningKey::new(
            model,
            batch,
            "NVIDIA H200",
            "1.31.1",
            (ConvAlgoSearch::Exhaustive, CudnnWorkspace::Max),
            &[NHWC_FUSED, NHWC, NCHW],
        )
    }

    #[test]
    fn a_fixed_amount_of_work_takes_the_candidate_that_finishes_it_soonest() {
        // As measured for ResNet-50 FP16 at batch 256 on an H200: fused is faster per batch
        // but compiles its kernels on the first inference.
        let times = |c: Candidate| match (c.nhwc, c.fused) {
            (true, true) => Ok((14.55, 9.88)),
            (true, false) => Ok((21.51, 1.72)),
            _ => Ok((26.30, 1.36)),
        };
        let record = TuningRecord::measure(key(b"m", 256), times).unwrap();
        assert_eq!(record.choice, NHWC_FUSED);
        // 64 batches: NHWC 1.72 + 1.38 s, NCHW 1.36 + 1.68 s (sooner, but within a tenth,
        // and slower per batch), NHWC fused 9.88 + 0.93 s.
        let (choice, why) = record.soonest(64).unwrap();
        assert_eq!(choice, NHWC, "{why}");
        assert_eq!(
            why,
            "64 batches of 256 take 3.1 s with the set-up, against NHWC, fused 10.8 s, NCHW 3.0 s (of those within a tenth of the soonest, the fastest per batch)"
        );
        // A few batches: NCHW's quicker set-up wins by more than a tenth.
        assert_eq!(record.soonest(4).unwrap().0, NCHW);
        // 300 batches: 8.2 s against 14.2 s; 1,100: 25.4 s against 25.9 s, within a tenth,
        // so the faster batches win.
        assert_eq!(record.soonest(300).unwrap().0, NHWC);
        assert_eq!(record.soonest(1100).unwrap().0, NHWC_FUSED);
    }

    #[test]
    fn the_fastest_candidate_that_ran_wins() {
        let times = |c: Candidate| match (c.nhwc, c.fused) {
            (true, true) => Err(anyhow!("cuDNN could not fuse\nsecond line")),
            (true, false) => Ok((12.0, 1.0)),
            _ => Ok((15.5, 0.5)),
        };
        let record = TuningRecord::measure(key(b"m", 256), times).unwrap();
        assert_eq!(record.choice, NHWC);
        assert_eq!(record.trials.len(), 3);
        assert_eq!(
            record.trials[0].error.as_deref(),
            Some("cuDNN could not fuse")
        );
        assert_eq!(
            record.said(),
            "measured per batch of 256 on NVIDIA H200: NHWC, fused failed, NHWC 12.00 ms, NCHW 15.50 ms"
        );
    }

    #[test]
    fn nothing_that_ran_is_an_error_naming_every_candidate() {
        let e = TuningRecord::measure(key(b"m", 1), |c| Err(anyhow!("no {c}"))).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("NHWC, fused: no NHWC, fused"), "{e}");
        assert!(e.contains("NCHW: no NCHW"), "{e}");
    }

    #[test]
    fn a_record_answers_only_its_own_key() {
        let dir = tempfile::tempdir().unwrap();
        let record = TuningRecord::measure(key(b"m", 32), |c| {
            Ok((if c.fused { 1.0 } else { 2.0 }, 0.1))
        })
        .unwrap();
        let path = store(dir.path(), &record).unwrap();
        assert!(path.exists());
        assert_eq!(lookup(dir.path(), &key(b"m", 32)), Some(record.clone()));
        assert_eq!(lookup(dir.path(), &key(b"m", 64)), None);
        assert_eq!(lookup(dir.path(), &key(b"other model", 32)), None);
        let mut other_gpu = key(b"m", 32);
        other_gpu.gpu = "NVIDIA H100 80GB HBM3".into();
        assert_eq!(lookup(dir.path(), &other_gpu), None);
    }

    #[test]
    fn a_damaged_record_is_measured_again() {
        let dir = tempfile::tempdir().unwrap();
        let k = key(b"m", 8);
        std::fs::write(dir.path().join(k.file_name()), b"{\"key\": ").unwrap();
        assert_eq!(lookup(dir.path(), &k), None);
    }

    #[test]
    fn the_cache_folder_follows_the_environment() {
        // The only test that changes these variables (nextest runs each test in a process).
        let saved: Vec<_> = [CACHE_ENV, "XDG_CACHE_HOME", "HOME"]
            .iter()
            .map(|v| (*v, std::env::var_os(v)))
            .collect();
        let set = |name: &str, value: Option<&str>| match value {
            Some(v) => std::env::set_var(name, v),
            None => std::env::remove_var(name),
        };
        set(CACHE_ENV, Some("/c"));
        assert_eq!(cache_dir(), Some(PathBuf::from("/c/ort-cuda-tuning")));
        set(CACHE_ENV, None);
        set("XDG_CACHE_HOME", Some("/x"));
        assert_eq!(
            cache_dir(),
            Some(PathBuf::from("/x/trtkit/ort-cuda-tuning"))
        );
        set("XDG_CACHE_HOME", None);
        set("HOME", Some("/h"));
        assert_eq!(
            cache_dir(),
            Some(PathBuf::from("/h/.cache/trtkit/ort-cuda-tuning"))
        );
        for (name, value) in saved {
            match value {
                Some(v) => std::env::set_var(name, v),
                None => std::env::remove_var(name),
            }
        }
    }
}
