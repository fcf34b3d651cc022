//! Where tract's CPU time goes on one model: the model is prepared as the tract backend
//! prepares it (batch fixed, optimized for the CPU kernels), run `--runs` times after one
//! warm-up, and every node is timed; prints the time per op kind and the slowest nodes.
//! The profile behind the README's figures of tract against ONNX Runtime.
//!
//! ```text
//! cargo build --release --example tract_profile
//! target/release/examples/tract_profile models/resnet50.onnx --batch 2 --runs 5 [--threads 1] [--info]
//! ```

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tract_onnx::prelude::*;
use trtkit::onnx::rewrite::pass::Pass;
use trtkit::onnx::shape::{Batch, FixBatch};

struct Args {
    model: PathBuf,
    batch: usize,
    runs: usize,
    threads: usize,
    top: usize,
    info: bool,
}

fn args() -> Result<Args> {
    let mut a = Args {
        model: PathBuf::new(),
        batch: 1,
        runs: 5,
        threads: 1,
        top: 15,
        info: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| -> Result<usize> {
            it.next()
                .with_context(|| format!("{name} needs a value"))?
                .parse()
                .with_context(|| format!("{name} needs a number"))
        };
        match arg.as_str() {
            "--batch" => a.batch = value("--batch")?,
            "--runs" => a.runs = value("--runs")?,
            "--threads" => a.threads = value("--threads")?,
            "--top" => a.top = value("--top")?,
            "--info" => a.info = true,
            _ if arg.starts_with("--") => bail!("unknown flag {arg}"),
            _ => a.model = PathBuf::from(arg),
        }
    }
    if a.model.as_os_str().is_empty() {
        bail!("usage: tract_profile MODEL.onnx [--batch N] [--runs N] [--threads N] [--top N] [--info]");
    }
    Ok(a)
}

fn main() -> Result<()> {
    // The kernel cost model trtkit itself uses (before any thread starts).
    trtkit::backend::tract_kernels::choose();
    let a = args()?;
    let model = trtkit::onnx::OnnxModel::load(&a.model)?;
    let model = FixBatch::new(Batch::Static(a.batch as i64)).run(model)?.0;
    let dir = model.base_dir().to_string_lossy().into_owned();
    let parsed = tract_onnx::onnx()
        .with_ignore_value_info(true)
        .parse(&model.proto, Some(&dir))
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let typed = parsed
        .model
        .into_optimized()
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let executor = if a.threads > 1 {
        tract_linalg::multithread::Executor::multithread(a.threads)
    } else {
        tract_linalg::multithread::Executor::SingleThread
    };
    let options = RunOptions {
        executor: Some(executor),
        ..Default::default()
    };
    let plan = typed
        .into_runnable_with_options(&options)
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let fact = plan.model().input_fact(0)?.clone();
    let shape: Vec<usize> = fact
        .shape
        .as_concrete()
        .context("the input shape is not concrete")?
        .to_vec();
    let input = Tensor::zero::<f32>(&shape)?;
    let mut state = tract_onnx::tract_core::plan::SimpleState::new(&plan)?;
    state
        .run(tvec!(input.clone().into()))
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let mut per_node: HashMap<usize, Duration> = HashMap::new();
    let started = Instant::now();
    for _ in 0..a.runs {
        state
            .run_plan_with_eval(
                tvec!(input.clone().into()),
                |ctx, op_state, node, inputs| {
                    let t0 = Instant::now();
                    let out = tract_onnx::tract_core::plan::eval(ctx, op_state, node, inputs);
                    *per_node.entry(node.id).or_default() += t0.elapsed();
                    out
                },
            )
            .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    }
    let wall = started.elapsed();
    let model = plan.model();
    let mut per_kind: HashMap<String, (Duration, usize)> = HashMap::new();
    for (id, d) in &per_node {
        let e = per_kind
            .entry(model.node(*id).op().name().into_owned())
            .or_default();
        e.0 += *d;
        e.1 += 1;
    }
    let total: Duration = per_node.values().sum();
    let ms = |d: Duration| d.as_secs_f64() * 1e3 / a.runs as f64;
    let kernels = trtkit::backend::tract_kernels::in_use().map_or_else(
        || "-".to_string(),
        |k| format!("{} ({})", k.model, k.source),
    );
    println!(
        "{}: batch {}, {} thread(s), {} runs, kernel cost model {kernels}: {:.2} ms per run ({:.2} ms per sample), nodes {:.2} ms",
        a.model.display(),
        a.batch,
        a.threads,
        a.runs,
        ms(wall),
        ms(wall) / a.batch as f64,
        ms(total)
    );
    let mut kinds: Vec<_> = per_kind.into_iter().collect();
    kinds.sort_by_key(|k| std::cmp::Reverse(k.1 .0));
    println!(
        "{:<28} {:>6} {:>10} {:>7}",
        "op", "nodes", "ms/run", "share"
    );
    for (kind, (d, n)) in &kinds {
        println!(
            "{kind:<28} {n:>6} {:>10.3} {:>6.1}%",
            ms(*d),
            100.0 * d.as_secs_f64() / total.as_secs_f64()
        );
    }
    let mut nodes: Vec<_> = per_node.into_iter().collect();
    nodes.sort_by_key(|n| std::cmp::Reverse(n.1));
    println!("slowest nodes:");
    for (id, d) in nodes.into_iter().take(a.top) {
        let node = model.node(id);
        let out = model.outlet_fact(OutletId::new(id, 0))?;
        println!(
            "{:>8.3} ms  {:<24} {:<40} -> {:?}",
            ms(d),
            node.op().name(),
            node.name,
            out.shape
        );
        if a.info {
            // What the op says about itself: for OptMatMul, the m/k/n and the kernel picked.
            for line in node.op().info()? {
                println!("             {line}");
            }
        }
    }
    Ok(())
}
