//! What NVML sampling costs a cell: one model opened once on tract-cuda, run in blocks of
//! `--seconds` each, with `bench`'s own monitor sampling at `--hz` in half of the blocks and off
//! in the other half (in ABBA order, so drift of clocks and temperature falls on both sides
//! alike). Prints every block and the paired difference of samples/s. Needs a GPU; run on a
//! machine with an NVIDIA GPU:
//!
//! ```text
//! cargo build --release --example nvml_overhead
//! target/release/examples/nvml_overhead models/resnet18.onnx --batch 1 --pairs 8 --seconds 3
//! ```

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::time::Instant;
use trtkit::backend::open;
use trtkit::backend::select::{BackendKind, BackendOptions};
use trtkit::backend::Device;
use trtkit::bench::monitor::Monitor;
use trtkit::data::synthetic::timing_inputs;

struct Args {
    model: PathBuf,
    batch: usize,
    pairs: usize,
    seconds: f64,
    hz: f64,
}

fn args() -> Result<Args> {
    let mut a = Args {
        model: PathBuf::new(),
        batch: 1,
        pairs: 8,
        seconds: 3.0,
        hz: 20.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().context("a flag without its value");
        match flag.as_str() {
            "--batch" => a.batch = value()?.parse()?,
            "--pairs" => a.pairs = value()?.parse()?,
            "--seconds" => a.seconds = value()?.parse()?,
            "--hz" => a.hz = value()?.parse()?,
            m if !m.starts_with('-') => a.model = PathBuf::from(m),
            other => bail!("unknown flag {other}"),
        }
    }
    if a.model.as_os_str().is_empty() {
        bail!("usage: nvml_overhead MODEL.onnx [--batch N] [--pairs N] [--seconds S] [--hz HZ]");
    }
    Ok(a)
}

fn main() -> Result<()> {
    let a = args()?;
    let options = BackendOptions {
        kind: BackendKind::Tract,
        device: Device::Cuda,
        batch: Some(a.batch),
        ..Default::default()
    };
    let mut backend = open(&a.model, &options)?;
    let inputs = timing_inputs(backend.inputs(), a.batch)?;
    let warm = Instant::now();
    while warm.elapsed().as_secs_f64() < a.seconds {
        backend.run(&inputs)?;
    }
    let mut on = vec![];
    let mut off = vec![];
    // ABBA: on, off, off, on, on, off, …
    for block in 0..2 * a.pairs {
        let sampling = matches!(block % 4, 0 | 3);
        let monitor = if sampling {
            Some(
                Monitor::start(&trtkit::bench::monitor::NvmlGpu::Index(0), a.hz)
                    .map_err(anyhow::Error::msg)?,
            )
        } else {
            None
        };
        let start = Instant::now();
        let mut runs = 0u64;
        while start.elapsed().as_secs_f64() < a.seconds {
            backend.run(&inputs)?;
            runs += 1;
        }
        let rate = (runs * a.batch as u64) as f64 / start.elapsed().as_secs_f64();
        let readings = monitor.map(|m| m.stop().0.len());
        println!(
            "block {block:>2}  nvml {:>3}  {rate:9.2} samples/s  ({runs} runs{})",
            if sampling { "on" } else { "off" },
            readings
                .map(|n| format!(", {n} readings"))
                .unwrap_or_default()
        );
        if sampling {
            on.push(rate)
        } else {
            off.push(rate)
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let diffs: Vec<f64> = on
        .iter()
        .zip(&off)
        .map(|(a, b)| 100.0 * (a - b) / b)
        .collect();
    let d = mean(&diffs);
    let sd = (diffs.iter().map(|x| (x - d).powi(2)).sum::<f64>() / (diffs.len().max(2) - 1) as f64)
        .sqrt();
    println!(
        "\nsampling at {} Hz: {:.2} samples/s on, {:.2} off; paired difference {d:+.2}% ± {:.2}% (standard error, {} pairs)",
        a.hz,
        mean(&on),
        mean(&off),
        sd / (diffs.len() as f64).sqrt(),
        diffs.len()
    );
    Ok(())
}
