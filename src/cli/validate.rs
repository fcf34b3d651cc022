//! `trtkit validate MODEL --dataset DIR`: flags into a [`ValidateConfig`], and the rendering of
//! the accuracy report (table or JSON, and the per-image predictions CSV).

use crate::atomic_file::write_atomic_with;
use crate::cli::args::backend::BackendArgs;
use crate::cli::args::output::OutputArgs;
use crate::cli::args::preprocess::PreprocessArgs;
use crate::cli::args::samples::positive_samples;
use crate::cli::args::timing::warmup_batches;
use crate::cli::progress::Bar;
use crate::cli::UsageError;
use crate::data::dataset::DatasetOptions;
use crate::measure::accuracy::{
    validate, Prediction, ValidateConfig, ValidateReport, WarmupBatches,
};
use crate::metrics::latency::BatchLatency;
use crate::report::table::{Align, Table};
use anyhow::Result;
use clap::Args;
use std::path::{Path, PathBuf};

/// Flags of `validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The model to validate (ONNX).
    pub model: PathBuf,
    /// Dataset folder: one sub-folder per class (ImageFolder), or flat with --labels.
    #[arg(long)]
    pub dataset: PathBuf,
    /// Images per batch.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Backend, device and threads (the image loader uses rayon's pool besides).
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Labels for a flat folder: `file,label` CSV, or one label per line in sorted file order.
    #[arg(long)]
    pub labels: Option<PathBuf>,
    /// One class name per line (line i = model class i); maps folder or label names to indices.
    #[arg(long)]
    pub class_map: Option<PathBuf>,
    /// Use only the first N images (after shuffling, if --shuffle-seed is given).
    #[arg(long = "num-samples", alias = "limit", value_name = "N")]
    pub num_samples: Option<usize>,
    /// Shuffle the images with this seed (the same seed picks the same subset everywhere).
    #[arg(long)]
    pub shuffle_seed: Option<u64>,
    /// Warm-up batches left out of the latency figures (default: 10% of the batches).
    #[arg(long, value_name = "N", value_parser = warmup_batches)]
    pub warmup: Option<WarmupBatches>,
    /// How images become model input.
    #[command(flatten)]
    pub preprocess: PreprocessArgs,
    /// Batches kept ready ahead of inference.
    #[arg(long, default_value_t = 4)]
    pub prefetch: usize,
    /// Write one line per image (file, label, top-5 classes) to this CSV file.
    #[arg(long)]
    pub save_predictions: Option<PathBuf>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// The validation these flags describe; every flag check of `validate` is here.
pub fn config(args: &ValidateArgs) -> Result<ValidateConfig> {
    if args.batch_size == 0 {
        return Err(UsageError("--batch-size must be at least 1".into()).into());
    }
    Ok(ValidateConfig {
        model: args.model.clone(),
        dataset: args.dataset.clone(),
        dataset_options: DatasetOptions {
            labels: args.labels.clone(),
            class_map: args.class_map.clone(),
        },
        shuffle_seed: args.shuffle_seed,
        limit: positive_samples(args.num_samples)?,
        batch_size: args.batch_size,
        backend: args.backend.options(None),
        warmup: args.warmup.unwrap_or(WarmupBatches::Fraction(0.1)),
        preprocess: args.preprocess.request(),
        prefetch: args.prefetch,
        keep_predictions: args.save_predictions.is_some(),
    })
}

/// Runs `validate`.
pub fn run(args: ValidateArgs) -> Result<()> {
    let config = config(&args)?;
    let report = validate(&config, &Bar::new("images", args.output.quiet()))?;
    if let Some(path) = &args.save_predictions {
        save_predictions(path, &report.predictions)?;
    }
    args.output
        .print(&report, |markdown| render(&report, markdown))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes the per-image predictions as CSV: file, label, top-1 … top-5.
fn save_predictions(path: &Path, predictions: &[Prediction]) -> Result<()> {
    write_atomic_with(path, |w| {
        writeln!(w, "file,label,top1,top2,top3,top4,top5")?;
        for p in predictions {
            let mut cells: Vec<String> = p.top5.iter().map(|c| c.to_string()).collect();
            cells.resize(5, String::new());
            writeln!(
                w,
                "{},{},{}",
                csv_field(&p.file.display().to_string()),
                p.label,
                cells.join(",")
            )?;
        }
        Ok(())
    })
}

/// The terminal (or markdown) rendering of a validation report.
pub fn render(r: &ValidateReport, markdown: bool) -> String {
    let mut t = Table::new(&["metric", "value"]).with_align(&[Align::Left, Align::Right]);
    let pct = |v: f64| format!("{:.2}%", v * 100.0);
    let ms = |s: &BatchLatency| {
        if s.batches == 0 {
            "n/a".to_string()
        } else {
            format!("{:.3} / {:.3} ms", s.mean_ms, s.max_ms)
        }
    };
    t.row(vec!["top-1".into(), pct(r.top1)]);
    t.row(vec!["top-5".into(), pct(r.top5)]);
    t.row(vec!["images".into(), r.images.to_string()]);
    t.row(vec!["skipped".into(), r.skipped.to_string()]);
    t.row(vec!["images/s".into(), format!("{:.1}", r.images_per_s)]);
    t.row(vec![
        "batches (warm-up)".into(),
        format!("{} ({}) of {}", r.batches, r.warmup_batches, r.batch_size),
    ]);
    t.row(vec!["latency-all mean / max".into(), ms(&r.latency_all)]);
    t.row(vec![
        "latency-model mean / max".into(),
        ms(&r.latency_model),
    ]);
    let mut out = format!(
        "model    {}\nbackend  {}\ndataset  {}\n\n",
        r.model, r.backend, r.dataset
    );
    out += &if markdown {
        t.render_markdown()
    } else {
        t.render()
    };
    if !r.skipped_images.is_empty() {
        out += &format!("\nskipped {} images:\n", r.skipped);
        for f in r.skipped_images.iter().take(20) {
            out += &format!("  {}: {}\n", f.path.display(), f.reason);
        }
        if r.skipped > 20 {
            out += &format!("  ... and {} more (--json lists all)\n", r.skipped - 20);
        }
    }
    out
}
