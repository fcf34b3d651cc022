//! `trtkit calibrate MODEL --calib-data SRC --batch-size N`: INT8 ranges into a keyed cache.

use crate::backend::select::open;
use crate::calibration::batches::{ArrayBatches, CalibrationBatches, SyntheticBatches};
use crate::calibration::cache::{self, CacheKey, CalibrationTable, Lookup};
use crate::calibration::collect::{collect, compute_ranges, TensorRange};
use crate::calibration::image_batches::{has_images, ImageBatches};
use crate::calibration::range::Algorithm;
use crate::cli::backend_args::BackendArgs;
use crate::cli::UsageError;
use crate::onnx::rewrite::plan::plan_int8;
use crate::onnx::shape::model_inputs;
use crate::onnx::tensor_info::Dim;
use crate::onnx::OnnxModel;
use crate::report::format::json;
use crate::report::table::{Align, Table};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Range algorithm names on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AlgoArg {
    /// KL-divergence threshold search (TensorRT's EntropyCalibration2).
    Entropy,
    /// Largest |x| seen.
    Minmax,
    /// A percentile of |x| (see --percentile).
    Percentile,
}

/// Flags of `calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The FP32 ONNX model to calibrate.
    pub model: PathBuf,
    /// Calibration data: a folder of JPEG/PNG images (any layout; decoded with the ImageNet
    /// evaluation preprocessing scaled to the model's input), a folder of .npy/.npz files (each
    /// [C,H,W] or [n,C,H,W], preprocessed; an .npz gives the array named after the model input
    /// or its only one), one such file, or `synthetic:SEED` for N(0,1) inputs.
    #[arg(long, value_name = "SRC")]
    pub calib_data: String,
    /// Batch size the model runs at; part of the cache key.
    #[arg(long, value_name = "N")]
    pub batch_size: usize,
    /// Use at most this many images (default: all; 512 for synthetic data).
    #[arg(long, value_name = "K")]
    pub num_images: Option<usize>,
    /// Range algorithm(s), comma-separated: `entropy,minmax,percentile` calibrates all three
    /// from one run over the data, one cache each.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "entropy")]
    pub algo: Vec<AlgoArg>,
    /// Percentile for --algo percentile.
    #[arg(long, default_value_t = 99.99)]
    pub percentile: f64,
    /// Calibrate even if a cache with the same key exists.
    #[arg(long)]
    pub recalibrate: bool,
    /// Folder of calibration caches.
    #[arg(long, default_value = "calibration", value_name = "DIR")]
    pub cache_dir: PathBuf,
    /// Also time the plain model (no captured tensors) over the same batches on the same
    /// backend: the baseline the calibration overhead is reported against.
    #[arg(long)]
    pub measure_plain: bool,
    /// The reference backend the model runs on.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `calibrate` reports.
#[derive(Debug, Serialize)]
pub struct CalibrateReport {
    /// The model.
    pub model: String,
    /// One entry per requested algorithm, in the order given.
    pub caches: Vec<CacheReport>,
    /// The backend that ran the model (absent when every cache was reused).
    pub backend: Option<String>,
    /// Timings in seconds (absent when every cache was reused).
    pub timing: Option<Timing>,
}

/// One algorithm's cache: reused or written by this run.
#[derive(Debug, Serialize)]
pub struct CacheReport {
    /// The range algorithm.
    pub algorithm: String,
    /// The cache file.
    pub cache: String,
    /// Whether an existing cache was reused.
    pub reused: bool,
    /// Why an existing cache was not reused (empty when there was none or it was reused).
    pub recalibrated_because: Vec<String>,
    /// The full key.
    pub key: CacheKey,
    /// Per-tensor ranges.
    pub tensors: Vec<TensorRange>,
}

/// Where calibration time went, in seconds.
#[derive(Debug, Serialize)]
pub struct Timing {
    /// Batches run.
    pub batches: usize,
    /// Inside the backend running the capture model, histograms of its outputs included.
    pub model_s: f64,
    /// Thread-time spent counting histograms, summed over threads (runs inside `model_s`).
    pub histogram_cpu_s: f64,
    /// Range search over all tensors, every algorithm.
    pub search_s: f64,
    /// Wall time of the run over the batches (loading, model, histograms).
    pub collect_wall_s: f64,
    /// Total wall time of the calibration (collect + search + writing the caches).
    pub total_s: f64,
    /// Wall time of the plain model over the same batches (with --measure-plain).
    pub plain_wall_s: Option<f64>,
    /// Of which inside the backend (with --measure-plain).
    pub plain_model_s: Option<f64>,
    /// `(collect_wall_s + search_s) / plain_wall_s - 1`, in percent: what the histograms and
    /// the range search add to running the model over the same batches (neither side counts
    /// preparing its model).
    pub overhead_percent: Option<f64>,
}

/// The requested algorithms, each once, in the order given.
fn algorithms(args: &CalibrateArgs) -> Result<Vec<Algorithm>> {
    if !(args.percentile > 0.0 && args.percentile <= 100.0) {
        return Err(UsageError(format!(
            "--percentile {} is not in (0, 100]",
            args.percentile
        ))
        .into());
    }
    let mut algos = Vec::new();
    for a in &args.algo {
        let algo = match a {
            AlgoArg::Entropy => Algorithm::Entropy,
            AlgoArg::Minmax => Algorithm::MinMax,
            AlgoArg::Percentile => Algorithm::Percentile {
                percent: args.percentile,
            },
        };
        if !algos.contains(&algo) {
            algos.push(algo);
        }
    }
    Ok(algos)
}

/// The SHA-256 of a file, hex.
pub fn file_sha256(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(format!("{:x}", Sha256::digest(&bytes)))
}

/// The single float input of a calibration model and its per-sample dims.
fn sample_input(model: &OnnxModel) -> Result<(String, Vec<usize>)> {
    let inputs = model_inputs(model);
    let shown = model.path.display();
    let [input] = inputs.as_slice() else {
        bail!(
            "{shown}: calibration feeds one input, the model has {}",
            inputs.len()
        );
    };
    let dims = input.dims.clone().unwrap_or_default();
    if dims.len() < 2 {
        bail!(
            "{shown}: input '{}' has no batch axis and sample dims",
            input.name
        );
    }
    let sample = dims[1..]
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => Ok(*n as usize),
            other => bail!(
                "{shown}: input '{}' axis '{other}' is not fixed; calibration needs fixed sample dims",
                input.name
            ),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((input.name.clone(), sample))
}

fn open_batches(
    args: &CalibrateArgs,
    input: &str,
    sample: &[usize],
) -> Result<Box<dyn CalibrationBatches>> {
    if args.batch_size == 0 {
        return Err(UsageError("--batch-size must be at least 1".into()).into());
    }
    if let Some(seed) = args.calib_data.strip_prefix("synthetic:") {
        let seed: u64 = seed.parse().map_err(|_| {
            UsageError(format!(
                "--calib-data {}: the seed is not a number",
                args.calib_data
            ))
        })?;
        let n = args.num_images.unwrap_or(512);
        return Ok(Box::new(SyntheticBatches::new(
            input,
            sample,
            args.batch_size,
            n,
            seed,
        )?));
    }
    let source = Path::new(&args.calib_data);
    if source.is_dir() && has_images(source) {
        return Ok(Box::new(ImageBatches::open(
            source,
            input,
            sample,
            args.batch_size,
            args.num_images,
        )?));
    }
    Ok(Box::new(ArrayBatches::open(
        source,
        input,
        sample,
        args.batch_size,
        args.num_images,
    )?))
}

/// Runs `calibrate`; `verbose` prints every tensor's range.
pub fn run(args: CalibrateArgs, verbose: bool) -> Result<()> {
    let report = calibrate(&args)?;
    if args.json {
        print!("{}", json(&report)?);
        return Ok(());
    }
    for c in &report.caches {
        let k = &c.key;
        if c.reused {
            println!(
                "reusing {} ({} tensors): its key matches (model {}, {} images, {}, batch {})",
                c.cache,
                c.tensors.len(),
                k.model_hash8(),
                k.image_count,
                k.algorithm,
                k.batch_size
            );
            continue;
        }
        for why in &c.recalibrated_because {
            println!("recalibrating: {why}");
        }
        println!(
            "calibrated {} tensors of {} over {} images at batch {} ({}) → {}",
            c.tensors.len(),
            report.model,
            k.image_count,
            k.batch_size,
            k.algorithm,
            c.cache
        );
    }
    if let (Some(tm), Some(backend)) = (&report.timing, &report.backend) {
        println!(
            "time on {backend}: model with histograms {:.2} s ({:.2} s of histogram thread-time inside), search {:.3} s, total {:.2} s",
            tm.model_s, tm.histogram_cpu_s, tm.search_s, tm.total_s
        );
        if let (Some(p), Some(o)) = (tm.plain_wall_s, tm.overhead_percent) {
            println!("plain model over the same batches: {p:.2} s; calibration adds {o:.1}%");
        }
    }
    if verbose {
        for c in report.caches.iter().filter(|c| !c.reused) {
            println!("\n{}:", c.algorithm);
            print!("{}", ranges_table(&c.tensors).render());
        }
    }
    Ok(())
}

fn ranges_table(ranges: &[TensorRange]) -> Table {
    let mut table = Table::new(&["tensor", "amax", "scale", "max |x|", "values"]).with_align(&[
        Align::Left,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
    ]);
    for r in ranges {
        table.row(vec![
            r.tensor.clone(),
            format!("{:.5}", r.amax),
            format!("{:.6e}", r.scale),
            format!("{:.5}", r.max_abs),
            r.count.to_string(),
        ]);
    }
    table
}

/// One requested algorithm: its key, its cache file and what the lookup found.
struct Pending {
    algo: Algorithm,
    key: CacheKey,
    path: PathBuf,
    found: Option<CalibrationTable>,
    because: Vec<String>,
}

/// Calibrates (or reuses caches) and returns what happened.
pub fn calibrate(args: &CalibrateArgs) -> Result<CalibrateReport> {
    let algos = algorithms(args)?;
    let model = OnnxModel::load(&args.model)?;
    let shown = args.model.display().to_string();
    let plan = plan_int8(model.graph());
    if plan.is_empty() {
        bail!("{shown}: no quantizable ops (Conv, ConvTranspose, Gemm, MatMul, residual Add); nothing to calibrate, no cache written");
    }
    let (input, sample) = sample_input(&model)?;
    let mut batches = open_batches(args, &input, &sample)?;
    let model_sha256 = file_sha256(&args.model)?;
    let stem = args
        .model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let pending: Vec<Pending> = algos
        .iter()
        .map(|&algo| {
            let key = CacheKey {
                model_sha256: model_sha256.clone(),
                preprocessing: batches.preprocessing(),
                dataset_fingerprint: batches.fingerprint(),
                image_count: batches.image_count(),
                algorithm: algo.to_string(),
                batch_size: args.batch_size,
                trtkit_version: env!("CARGO_PKG_VERSION").into(),
            };
            let path = cache::cache_path(&args.cache_dir, &stem, &key, &algo.file_tag());
            let (found, because) = look_up(&path, &key, args.recalibrate);
            Pending {
                algo,
                key,
                path,
                found,
                because,
            }
        })
        .collect();
    if pending.iter().all(|p| p.found.is_some()) {
        return Ok(CalibrateReport {
            model: shown,
            caches: pending
                .into_iter()
                .filter_map(|mut p| p.found.take().map(|t| reused(p, t)))
                .collect(),
            backend: None,
            timing: None,
        });
    }
    let total = Instant::now();
    let bar = progress_bar(batches.batch_count(), args.json);
    let options = args.backend.options(args.batch_size);
    let collected = collect(&model, &plan, batches.as_mut(), &options, &|| bar.inc(1))
        .with_context(|| shown.clone())?;
    bar.finish_and_clear();
    let t_search = Instant::now();
    let mut caches = Vec::with_capacity(pending.len());
    for mut p in pending {
        if let Some(table) = p.found.take() {
            caches.push(reused(p, table));
            continue;
        }
        let ranges = compute_ranges(&collected.histograms, p.algo);
        let table = CalibrationTable {
            calibrator: p.algo.trt_calibrator().into(),
            scales: ranges.iter().map(|r| (r.tensor.clone(), r.scale)).collect(),
        };
        cache::store(&p.path, &p.key, &table)?;
        caches.push(CacheReport {
            algorithm: p.algo.to_string(),
            cache: p.path.display().to_string(),
            reused: false,
            recalibrated_because: p.because,
            key: p.key,
            tensors: ranges,
        });
    }
    let search_s = t_search.elapsed().as_secs_f64();
    let total_s = total.elapsed().as_secs_f64();
    let plain = if args.measure_plain {
        Some(time_plain(&model, args, &input, &sample)?)
    } else {
        None
    };
    Ok(CalibrateReport {
        model: shown,
        caches,
        backend: Some(collected.backend.clone()),
        timing: Some(Timing {
            batches: collected.batches,
            model_s: collected.model_time.as_secs_f64(),
            histogram_cpu_s: collected.histogram_time.as_secs_f64(),
            search_s,
            collect_wall_s: collected.wall_time.as_secs_f64(),
            total_s,
            plain_wall_s: plain.map(|p| p.1),
            plain_model_s: plain.map(|p| p.0),
            overhead_percent: plain
                .map(|p| ((collected.wall_time.as_secs_f64() + search_s) / p.1 - 1.0) * 100.0),
        }),
    })
}

/// Looks a cache up: the table when its key matches (and `--recalibrate` was not given),
/// else the reasons it will be rewritten.
fn look_up(
    path: &Path,
    key: &CacheKey,
    recalibrate: bool,
) -> (Option<CalibrationTable>, Vec<String>) {
    if recalibrate {
        let why = path
            .exists()
            .then(|| "--recalibrate given".to_string())
            .into_iter()
            .collect();
        return (None, why);
    }
    match cache::lookup(path, key) {
        Lookup::Hit(table) => {
            tracing::info!("{}: key matches, reusing", path.display());
            (Some(table), vec![])
        }
        Lookup::Missing => (None, vec![]),
        Lookup::Stale(why) => (
            None,
            why.into_iter()
                .map(|w| format!("{} is stale ({w})", path.display()))
                .collect(),
        ),
    }
}

/// The report of a cache whose key matched.
fn reused(p: Pending, table: CalibrationTable) -> CacheReport {
    CacheReport {
        algorithm: p.algo.to_string(),
        cache: p.path.display().to_string(),
        reused: true,
        recalibrated_because: vec![],
        key: p.key,
        tensors: table
            .scales
            .iter()
            .map(|(n, &s)| TensorRange {
                tensor: n.clone(),
                amax: s * 127.0,
                scale: s,
                max_abs: f32::NAN,
                count: 0,
            })
            .collect(),
    }
}

fn progress_bar(batches: usize, hidden: bool) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(batches as u64);
    if hidden {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "calibrating {bar:30} {pos}/{len} batches {elapsed} ({per_sec})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// Runs the unmodified model over the same batches on the same backend: the baseline the
/// calibration overhead is measured against. Returns (seconds inside the backend, wall).
fn time_plain(
    model: &OnnxModel,
    args: &CalibrateArgs,
    input: &str,
    sample: &[usize],
) -> Result<(f64, f64)> {
    let mut backend = open(model, &args.backend.options(args.batch_size))?;
    let batches = open_batches(args, input, sample)?;
    let wall = Instant::now();
    let mut model_s = 0.0;
    for b in batches {
        model_s += backend.run(&[b?])?.elapsed.as_secs_f64();
    }
    Ok((model_s, wall.elapsed().as_secs_f64()))
}
