//! Calibration histogram throughput on one core: |x| of a post-ReLU-like tensor (half exact
//! zeros, the rest half-normal) and of a plain normal one counted into 2048 bins, each by the
//! scalar kernel (the baseline: portable Rust the compiler vectorises) and the SIMD one (the
//! default: AVX-512/AVX2 that also packs bin-0 values out of the increments), side by side.
//! `cargo bench --bench histogram`.
//! Calibrating ResNet-50 counts about 10 million values per image, so values/s per core sets
//! what the histograms add to the model's run.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use trtkit::calibration::histogram::{Histogram, Kernel, DEFAULT_BINS};

const VALUES: usize = 1 << 24;

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

const KERNELS: [(&str, Kernel); 2] = [("scalar", Kernel::Scalar), ("simd", Kernel::Simd)];

fn bench(c: &mut Criterion) {
    let gaussian = normal();
    let relu: Vec<f32> = gaussian.iter().map(|g| g.max(0.0)).collect();
    let one_core = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    let mut g = c.benchmark_group("histogram");
    g.sample_size(10);
    for (data, values) in [("post-relu", &relu), ("normal", &gaussian)] {
        g.throughput(Throughput::Elements(VALUES as u64));
        for (name, kernel) in KERNELS {
            let id = format!("{data} 16M values, 1 core, {name}");
            g.bench_function(id, |b| {
                b.iter(|| {
                    one_core.install(|| {
                        Histogram::from_values_with(DEFAULT_BINS, black_box(values), kernel)
                    })
                })
            });
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
