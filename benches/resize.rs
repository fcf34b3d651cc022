//! Resize-then-crop of one ImageNet-sized photo (500×375 RGB, bilinear, shorter side to 256,
//! centre 224×224) on one core: the part of preprocessing that is trtkit's own code (the
//! decoder is libjpeg-turbo). `cargo bench --bench resize` times the portable kernels (what
//! every processor ran before the AVX2 ones, and still runs without AVX2) and the best ones
//! this processor has, side by side; both give the same bytes.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use trtkit::data::decode::RgbImage;
use trtkit::data::resize::{resize_crop_with, Interpolation, Kernels, Window};

fn photo(width: usize, height: usize) -> RgbImage {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let pixels = (0..width * height * 3)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Smooth gradients plus a little noise, like a photo.
            ((i / 3 % width + i / 3 / width) as u64 / 4 + (state & 15)) as u8
        })
        .collect();
    RgbImage {
        width,
        height,
        pixels,
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("resize");
    g.throughput(Throughput::Elements(1));
    for (w, h) in [(500, 375), (375, 500)] {
        let img = photo(w, h);
        let (rw, rh) = if w > h {
            (w * 256 / h, 256)
        } else {
            (256, h * 256 / w)
        };
        let win = Window {
            resized_w: rw,
            resized_h: rh,
            left: (rw - 224) / 2,
            top: (rh - 224) / 2,
            width: 224,
            height: 224,
        };
        for kind in [Interpolation::Bilinear, Interpolation::Bicubic] {
            for kernels in [Kernels::Portable, Kernels::Best] {
                g.bench_function(format!("{w}x{h} {kind:?} to 224 crop, {kernels:?}"), |b| {
                    b.iter(|| resize_crop_with(black_box(&img), &win, kind, kernels))
                });
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
