//! Benchmark: read + decode + `imagenet` preprocessing of every JPEG in a folder. Prints one
//! JSON line per measurement. Run through scripts/bench_preprocess.py, which times
//! torchvision + PIL on the same files beside it.
//!
//! Usage:
//!   bench_preprocess DIR ROUNDS THREADS...      rayon pool of each size; every thread's share
//!                                               is the whole folder ROUNDS times (weak scaling)
//!   bench_preprocess --process DIR ROUNDS START one thread, timed from START (Unix time in ms,
//!                                               so that several processes start together)
//!   bench_preprocess --alu SECONDS THREADS...   control: a pure integer loop on each thread
//!                                               count, to show how far the machine scales at all
//!   bench_preprocess --decode-only DIR ROUNDS START
//!                                               as --process, but read + decode of the rows the
//!                                               crop needs and nothing else: the floor under the
//!                                               pipeline while the decoder is libjpeg-turbo

use rayon::prelude::*;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use trtkit::data::decode::{decode_rows, RowSink};
use trtkit::data::loader::load_one;
use trtkit::data::preprocess::Preprocess;
use trtkit::data::resize::Resampler;

fn jpegs(dir: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
        .collect();
    files.sort();
    anyhow::ensure!(!files.is_empty(), "no .jpg files in {dir}");
    Ok(files)
}

fn report(kind: &str, threads: usize, images: usize, secs: f64) {
    println!(
        "{{\"impl\": \"trtkit\", \"mode\": \"{kind}\", \"threads\": {threads}, \"images\": {images}, \"seconds\": {secs:.4}, \"images_per_s\": {:.1}}}",
        images as f64 / secs
    );
}

fn pool_bench(dir: &str, rounds: usize, thread_counts: &[String]) -> anyhow::Result<()> {
    let files = jpegs(dir)?;
    let pre = Preprocess::imagenet();
    for t in thread_counts {
        let threads: usize = t.parse()?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        let work = |copies: usize| {
            (0..files.len() * copies).into_par_iter().for_each_init(
                || vec![0f32; pre.elements()],
                |buf, i| {
                    load_one(&files[i % files.len()], &pre, buf).expect("benchmark image failed")
                },
            )
        };
        pool.install(|| work(threads)); // warm-up: page cache, allocator, thread start
        let start = Instant::now();
        for _ in 0..rounds {
            pool.install(|| work(threads));
        }
        let secs = start.elapsed().as_secs_f64();
        report("threads", threads, files.len() * rounds * threads, secs);
    }
    Ok(())
}

fn process_bench(dir: &str, rounds: usize, start_ms: u64) -> anyhow::Result<()> {
    let files = jpegs(dir)?;
    let pre = Preprocess::imagenet();
    let mut buf = vec![0f32; pre.elements()];
    for f in &files {
        load_one(f, &pre, &mut buf)?; // warm-up
    }
    wait_until(start_ms);
    let start = Instant::now();
    for _ in 0..rounds {
        for f in &files {
            load_one(f, &pre, &mut buf)?;
        }
    }
    report(
        "process",
        1,
        files.len() * rounds,
        start.elapsed().as_secs_f64(),
    );
    Ok(())
}

/// Asks the decoder for the rows the crop needs, as the pipeline does, and drops them. The
/// resampler that says how many rows that is reuses one buffer, so that no per-image
/// allocation is timed as decoding.
struct DropRows<'a> {
    pre: &'a Preprocess,
    buffer: Vec<u8>,
}

impl RowSink for DropRows<'_> {
    fn begin(&mut self, width: usize, height: usize) -> anyhow::Result<usize> {
        let win = self.pre.window(width, height)?;
        let buffer = std::mem::take(&mut self.buffer);
        let rs = Resampler::with_buffer(width, height, &win, self.pre.interpolation, buffer);
        let rows = rs.rows_needed();
        self.buffer = rs.into_buffer();
        Ok(rows)
    }

    fn row(&mut self, _y: usize, rgb: &[u8]) {
        std::hint::black_box(rgb);
    }
}

fn decode_bench(dir: &str, rounds: usize, start_ms: u64) -> anyhow::Result<()> {
    let files = jpegs(dir)?;
    let pre = Preprocess::imagenet();
    let mut sink = DropRows {
        pre: &pre,
        buffer: Vec::new(),
    };
    let mut decode_all = || -> anyhow::Result<()> {
        for f in &files {
            decode_rows(&std::fs::read(f)?, &mut sink)?;
        }
        Ok(())
    };
    decode_all()?; // warm-up
    wait_until(start_ms);
    let start = Instant::now();
    for _ in 0..rounds {
        decode_all()?;
    }
    report(
        "decode-only",
        1,
        files.len() * rounds,
        start.elapsed().as_secs_f64(),
    );
    Ok(())
}

/// Sleeps until `start_ms` (Unix time in ms), so that several processes start together.
fn wait_until(start_ms: u64) {
    let start_at = UNIX_EPOCH + Duration::from_millis(start_ms);
    if let Ok(wait) = start_at.duration_since(SystemTime::now()) {
        std::thread::sleep(wait);
    }
}

/// A dependent chain of integer multiply-xorshift steps: ALU only, no memory traffic.
fn alu_steps(seed: u64, steps: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..steps {
        x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 29;
    }
    x
}

fn alu_bench(seconds: f64, thread_counts: &[String]) -> anyhow::Result<()> {
    // Calibrate a chunk of about 10 ms on one thread.
    let mut chunk = 1u64 << 16;
    loop {
        let t = Instant::now();
        std::hint::black_box(alu_steps(chunk, chunk));
        if t.elapsed().as_secs_f64() > 0.01 {
            break;
        }
        chunk *= 2;
    }
    for t in thread_counts {
        let threads: usize = t.parse()?;
        let start = Instant::now();
        let chunks: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|i| {
                    s.spawn(move || {
                        let mut done = 0u64;
                        while start.elapsed().as_secs_f64() < seconds {
                            std::hint::black_box(alu_steps(i as u64 + done, chunk));
                            done += 1;
                        }
                        done
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{{\"impl\": \"alu\", \"threads\": {threads}, \"seconds\": {secs:.4}, \"gsteps_per_s\": {:.3}}}",
            (chunks * chunk) as f64 / secs / 1e9
        );
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: bench_preprocess DIR ROUNDS THREADS... | --process DIR ROUNDS START_MS | --alu SECONDS THREADS... | --decode-only DIR ROUNDS START_MS";
    match args.get(1).map(String::as_str) {
        Some("--process") if args.len() == 5 => {
            process_bench(&args[2], args[3].parse()?, args[4].parse()?)
        }
        Some("--decode-only") if args.len() == 5 => {
            decode_bench(&args[2], args[3].parse()?, args[4].parse()?)
        }
        Some("--alu") if args.len() >= 4 => alu_bench(args[2].parse()?, &args[3..]),
        Some(_) if args.len() >= 4 => pool_bench(&args[1], args[2].parse()?, &args[3..]),
        _ => anyhow::bail!(usage),
    }
}
