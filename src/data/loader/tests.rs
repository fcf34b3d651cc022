use super::*;
use std::path::PathBuf;

fn write_png(path: &std::path::Path, w: u32, h: u32, rgb: [u8; 3]) {
    let data: Vec<u8> = (0..w * h).flat_map(|_| rgb).collect();
    let file = std::fs::File::create(path).unwrap();
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header().unwrap().write_image_data(&data).unwrap();
}

fn tiny() -> Preprocess {
    Preprocess {
        resize: Some(4),
        crop: (4, 4),
        ..Preprocess::imagenet().unnormalized()
    }
}

/// `count` 6×4 PNGs whose red channel is `10 × index`, as samples labelled by index.
fn pngs(dir: &std::path::Path, count: usize) -> Vec<Sample> {
    (0..count)
        .map(|i| {
            let path = dir.join(format!("{i:05}.png"));
            write_png(&path, 6, 4, [(i % 25) as u8 * 10, 0, 0]);
            Sample { path, label: i }
        })
        .collect()
}

fn first_f32(m: &mut HostBatch) -> f32 {
    match m.values_mut() {
        ValuesMut::F32(v) => v[0],
        ValuesMut::F16(v) => v[0].to_f32(),
    }
}

#[test]
fn batches_keep_order_and_skip_bad_images() {
    let d = tempfile::tempdir().unwrap();
    let mut samples = pngs(d.path(), 7);
    std::fs::write(&samples[3].path, b"not an image").unwrap();
    samples.push(Sample {
        path: d.path().join("missing.png"),
        label: 99,
    });
    let loader = Loader::host(samples, tiny(), 3, 1, ElemType::F32).unwrap();
    let mut batches: Vec<Loaded<HostBatch>> = loader.collect();
    assert_eq!(batches.len(), 3);
    let labels: Vec<Vec<usize>> = batches
        .iter()
        .map(|b| b.samples.iter().map(|s| s.label).collect())
        .collect();
    assert_eq!(labels, vec![vec![0, 1, 2], vec![4, 5], vec![6]]);
    // Image 4 moved up into the skipped image's row: its first value is red 40/255.
    let mut m = batches[1].take_memory();
    assert!((first_f32(&mut m) - 40.0 / 255.0).abs() < 1e-6);
    assert_eq!(batches[1].failures.len(), 1);
    assert!(batches[1].failures[0].reason.contains("not a JPEG or PNG"));
    assert!(batches[2].failures[0]
        .reason
        .contains("cannot read the file"));
    assert!(batches[2].failures[0].path.ends_with("missing.png"));
}

#[test]
fn float16_rows_are_the_float32_rows_rounded() {
    let d = tempfile::tempdir().unwrap();
    let samples = pngs(d.path(), 5);
    let values = |elem| -> Vec<f32> {
        let loader = Loader::host(samples.clone(), Preprocess::imagenet(), 2, 1, elem).unwrap();
        let mut out = vec![];
        for mut b in loader {
            let rows = b.samples.len();
            let data = b
                .take_memory()
                .into_values(2 * Preprocess::imagenet().elements());
            let n = data.len() / 2;
            out.extend_from_slice(&data.as_f32()[..rows * n]);
        }
        out
    };
    let (wide, narrow) = (values(ElemType::F32), values(ElemType::F16));
    assert_eq!(wide.len(), narrow.len());
    for (a, b) in wide.iter().zip(&narrow) {
        assert_eq!(f16::from_f32(*a).to_f32(), *b);
    }
}

/// Every batch lands in one of the ring's buffers, at its address: the loader neither
/// allocates nor copies a batch after the ring is made.
#[test]
fn batches_reuse_the_ring_buffers_in_place() {
    let d = tempfile::tempdir().unwrap();
    let samples = pngs(d.path(), 40);
    let buffers: Vec<HostBatch> = (0..3)
        .map(|_| HostBatch::new(ElemType::F32, 4 * tiny().elements()).unwrap())
        .collect();
    let mut ring: Vec<usize> = vec![];
    let buffers: Vec<HostBatch> = buffers
        .into_iter()
        .map(|b| {
            let data = b.into_values(usize::MAX);
            if let TensorData::F32(v) = &data {
                ring.push(v.as_ptr() as usize);
            }
            HostBatch::from_data(data, 4 * tiny().elements()).unwrap()
        })
        .collect();
    let loader = Loader::spawn(samples, tiny(), 4, buffers).unwrap();
    let mut seen = 0;
    for mut b in loader {
        let data = b.take_memory().into_values(usize::MAX);
        let TensorData::F32(v) = &data else {
            panic!("float32 buffer expected")
        };
        assert!(
            ring.contains(&(v.as_ptr() as usize)),
            "a batch outside the ring"
        );
        assert!((v[0] - (b.samples[0].label % 25) as f32 * 10.0 / 255.0).abs() < 1e-6);
        b.put_back(HostBatch::from_data(data, 4 * tiny().elements()).unwrap());
        seen += 1;
    }
    assert_eq!(seen, 10);
}

#[test]
fn a_buffer_smaller_than_a_batch_is_refused() {
    let small = vec![HostBatch::new(ElemType::F32, 10).unwrap()];
    let err = Loader::spawn(vec![], tiny(), 4, small).err().unwrap();
    assert!(
        err.to_string().contains("a batch buffer of 10 values"),
        "{err}"
    );
    assert!(HostBatch::new(ElemType::I64, 4).is_err());
}

#[test]
fn dropping_early_stops_the_worker() {
    let samples: Vec<Sample> = (0..100)
        .map(|i| Sample {
            path: PathBuf::from(format!("/nonexistent/{i}.jpg")),
            label: 0,
        })
        .collect();
    let mut loader = Loader::host(samples, Preprocess::imagenet(), 2, 1, ElemType::F32).unwrap();
    let held = loader.next();
    assert!(held.is_some());
    drop(loader); // must not hang, even with a batch still held
    drop(held);
}

#[test]
fn the_stats_count_every_image() {
    let d = tempfile::tempdir().unwrap();
    let samples = pngs(d.path(), 9);
    let mut loader = Loader::host(samples, tiny(), 4, 1, ElemType::F32).unwrap();
    let batches = loader.by_ref().count();
    assert_eq!(batches, 3);
    let stats = loader.stats();
    assert_eq!(stats.images, 9);
    assert!(stats.busy_s > 0.0 && stats.images_per_s > 0.0);
    assert_eq!(stats.threads, rayon::current_num_threads());
}

/// A batch size far beyond the samples allocates buffers for the samples, not for the batch.
#[test]
fn a_huge_batch_size_loads_the_samples_in_one_batch() {
    let d = tempfile::tempdir().unwrap();
    let samples = pngs(d.path(), 3);
    let loader = Loader::host(samples, tiny(), 1_000_000_000, 1, ElemType::F32).unwrap();
    let batches: Vec<Loaded<HostBatch>> = loader.collect();
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].samples.len(), 3);
    assert_eq!(batches[0].memory().data().len(), 3 * tiny().elements());
}

/// A prefetch far beyond the run makes a ring of the run's batches, not of the prefetch, and
/// still loads every image; the ring always covers a whole decoding group, so small runs with
/// small batches do not starve the loader.
#[test]
fn a_huge_prefetch_makes_a_ring_of_the_runs_batches() {
    assert_eq!(ring_len(2, usize::MAX, 7), 4);
    assert_eq!(ring_len(2, 1_000_000_000, 1), 1);
    for samples in [1, 5, 40] {
        let group = group_batches(1, rayon::current_num_threads());
        assert!(ring_len(1, 0, samples) >= group.min(samples));
    }
    let d = tempfile::tempdir().unwrap();
    let samples = pngs(d.path(), 5);
    let loader = Loader::host(samples, tiny(), 2, usize::MAX, ElemType::F32).unwrap();
    let sizes: Vec<usize> = loader.map(|b| b.samples.len()).collect();
    assert_eq!(sizes, [2, 2, 1]);
}
