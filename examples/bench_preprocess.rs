//! Benchmark: read + decode + `imagenet` preprocessing of every JPEG in a folder, on 1..N
//! threads. Prints one JSON line per thread count. Run through scripts/bench_preprocess.py,
//! which times torchvision + PIL on the same files beside it.
//!
//! Usage: bench_preprocess DIR ROUNDS THREADS...

use rayon::prelude::*;
use std::path::PathBuf;
use std::time::Instant;
use trtkit::data::loader::load_one;
use trtkit::data::preprocess::Preprocess;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        anyhow::bail!("usage: bench_preprocess DIR ROUNDS THREADS...");
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&args[1])?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .collect();
    files.sort();
    let rounds: usize = args[2].parse()?;
    let pre = Preprocess::imagenet();
    for t in &args[3..] {
        let threads: usize = t.parse()?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        let work = || {
            files.par_iter().for_each_init(
                || vec![0f32; pre.elements()],
                |buf, f| load_one(f, &pre, buf).expect("benchmark image failed"),
            )
        };
        pool.install(work); // warm-up: page cache, allocator
        let start = Instant::now();
        for _ in 0..rounds {
            pool.install(work);
        }
        let secs = start.elapsed().as_secs_f64();
        let images = (files.len() * rounds) as f64;
        println!(
            "{{\"impl\": \"trtkit\", \"threads\": {threads}, \"images\": {images}, \"seconds\": {secs:.4}, \"images_per_s\": {:.1}}}",
            images / secs
        );
    }
    Ok(())
}
