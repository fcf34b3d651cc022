//! Calibration histogram throughput on one core: |x| of a post-ReLU-like tensor (half exact
//! zeros, the rest half-normal) counted into 2048 bins. `cargo bench --bench histogram`.
//! Calibrating ResNet-50 counts about 10 million values per image, so values/s per core sets
//! what the histograms add to the model's run.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use trtkit::calibration::histogram::{Histogram, DEFAULT_BINS};

const VALUES: usize = 1 << 24;

fn post_relu() -> Vec<f32> {
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
            let g = ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32;
            g.max(0.0)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let values = post_relu();
    let one_core = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    let mut g = c.benchmark_group("histogram");
    g.sample_size(10);
    g.throughput(Throughput::Elements(VALUES as u64));
    g.bench_function("post-relu 16M values, 1 core", |b| {
        b.iter(|| one_core.install(|| Histogram::from_values(DEFAULT_BINS, black_box(&values))))
    });
    // A piece small enough to stay in the L2 cache between rounds (and to be counted on the
    // calling thread): what counting costs when the tensor is not read back from memory.
    let piece = &values[..1 << 16];
    g.throughput(Throughput::Elements(piece.len() as u64));
    g.bench_function("post-relu 64K values in cache, 1 core", |b| {
        b.iter(|| Histogram::from_values(DEFAULT_BINS, black_box(piece)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
