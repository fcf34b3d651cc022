//! Calibration histogram throughput on one core, the scalar kernel (the baseline: portable Rust
//! the compiler vectorises) and the SIMD one (the fused AVX-512/AVX2 pass) side by side, on four
//! kinds of activations counted into 2048 bins:
//!
//! - post-ReLU: half exact zeros, the rest half-normal;
//! - normal: N(0, 1);
//! - hard-swish: `x * relu6(x + 3) / 6` of N(0, 2), as in MobileNetV3 (many small negatives in
//!   [-0.375, 0), a few exact zeros, positives unbounded);
//! - growing: normal values in 256 pieces of 64K counted one after the other, each piece's
//!   spread 2^(1/16) times the last one's, so that the range grows between pieces (16
//!   doublings), as calibration samples arrive.
//!
//! 16M values each (read from memory), and for the first three a 64K piece that stays in the
//! L2 cache between rounds. `cargo bench --bench histogram`; criterion prints the throughput
//! (elements/s = values/s). Calibrating ResNet-50 counts about 10 million values per image, so
//! values/s per core sets what the histograms add to the model's run.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use trtkit::calibration::histogram::{Counter, Histogram, Kernel, DEFAULT_BINS};

const VALUES: usize = 1 << 24;

/// Values per piece of the growing data.
const PIECE: usize = 1 << 16;

/// Standard normal values from a fixed xorshift seed (Box-Muller).
fn normal() -> Vec<f32> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut unit = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..VALUES)
        .map(|_| {
            let (u, v) = (unit(), unit());
            ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
        })
        .collect()
}

/// The four data kinds, by name.
fn data() -> Vec<(&'static str, Vec<f32>)> {
    let gaussian = normal();
    let relu = gaussian.iter().map(|g| g.max(0.0)).collect();
    let hard_swish = gaussian
        .iter()
        .map(|g| {
            let x = 2.0 * g;
            x * (x + 3.0).clamp(0.0, 6.0) / 6.0
        })
        .collect();
    let growing = gaussian
        .chunks(PIECE)
        .enumerate()
        .flat_map(|(k, piece)| {
            let spread = 2f32.powf(k as f32 / 16.0 - 8.0);
            piece.iter().map(move |g| g * spread)
        })
        .collect();
    vec![
        ("post-relu", relu),
        ("normal", gaussian),
        ("hard-swish", hard_swish),
        ("growing", growing),
    ]
}

const KERNELS: [(&str, Kernel); 2] = [("scalar", Kernel::Scalar), ("simd", Kernel::Simd)];

/// One counter fed `values` piece by piece, as calibration feeds a tensor's samples.
fn count_pieces(values: &[f32], kernel: Kernel) -> Histogram {
    let mut counter = Counter::with_kernel(DEFAULT_BINS, kernel);
    for piece in values.chunks(PIECE) {
        counter.add(black_box(piece));
    }
    counter.finish()
}

fn bench(c: &mut Criterion) {
    let one_core = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    let mut g = c.benchmark_group("histogram");
    g.sample_size(10);
    for (data, values) in &data() {
        g.throughput(Throughput::Elements(VALUES as u64));
        for (name, kernel) in KERNELS {
            let id = format!("{data} 16M values, 1 core, {name}");
            if *data == "growing" {
                g.bench_function(id, |b| b.iter(|| count_pieces(values, kernel)));
                continue;
            }
            g.bench_function(id, |b| {
                b.iter(|| {
                    one_core.install(|| {
                        Histogram::from_values_with(DEFAULT_BINS, black_box(values), kernel)
                    })
                })
            });
        }
        if *data == "growing" {
            continue;
        }
        // A piece small enough to stay in the L2 cache between rounds (and to be counted on
        // the calling thread): what counting costs when the tensor is not read back from memory.
        let piece = &values[..1 << 16];
        g.throughput(Throughput::Elements(piece.len() as u64));
        for (name, kernel) in KERNELS {
            let id = format!("{data} 64K values in cache, 1 core, {name}");
            g.bench_function(id, |b| {
                b.iter(|| Histogram::from_values_with(DEFAULT_BINS, black_box(piece), kernel))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
