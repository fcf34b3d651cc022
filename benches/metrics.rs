//! Metrics over ResNet-50-sized outputs: 5,000 samples × 1,000 classes (the target: well under
//! a second). `cargo bench --bench metrics`.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use trtkit::metrics::closeness::{closeness, Tolerance};
use trtkit::metrics::compare::compare_outputs;
use trtkit::metrics::topk::topk;
use trtkit::tensor::{HostTensor, TensorData};

const SAMPLES: usize = 5_000;
const CLASSES: usize = 1_000;

/// Deterministic pseudo-random logits; B is A plus small noise.
fn logits() -> (Vec<f32>, Vec<f32>) {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    let a: Vec<f32> = (0..SAMPLES * CLASSES)
        .map(|_| next() * 10.0 - 5.0)
        .collect();
    let b = a.iter().map(|x| x + (next() - 0.5) * 2e-3).collect();
    (a, b)
}

fn bench(c: &mut Criterion) {
    let (a, b) = logits();
    let ta = HostTensor::new("logits", vec![SAMPLES, CLASSES], TensorData::F32(a)).unwrap();
    let tb = HostTensor::new("logits", vec![SAMPLES, CLASSES], TensorData::F32(b)).unwrap();
    let (fa, fb) = (ta.data.to_f64(), tb.data.to_f64());
    let tol = Tolerance::default();
    let mut g = c.benchmark_group("5000x1000");
    g.sample_size(10);
    g.bench_function("closeness", |x| {
        x.iter(|| closeness(black_box(&fa), black_box(&fb), SAMPLES, &tol))
    });
    g.bench_function("top10", |x| {
        x.iter(|| topk(black_box(&fa), black_box(&fb), SAMPLES, CLASSES, 10))
    });
    g.bench_function("compare_outputs (f32 in, all metrics)", |x| {
        x.iter(|| {
            compare_outputs(
                black_box(std::slice::from_ref(&ta)),
                black_box(std::slice::from_ref(&tb)),
                &tol,
                10,
            )
            .unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
