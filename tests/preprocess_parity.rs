//! Parity of the `imagenet` preset with torchvision's Resize(256) + CenterCrop(224) +
//! ToTensor() on PIL images, on the JPEG fixture made by scripts/make_parity_fixture.py
//! (baseline 4:2:0 colour, grayscale, CMYK, progressive 4:2:2). The target is 2/255 per
//! element; measured: 0 on every photo (the same decoder as PIL's, libjpeg-turbo, and PIL's
//! resampling arithmetic give the same bytes).

use std::path::Path;
use trtkit::data::decode::decode_rgb;
use trtkit::data::preprocess::Preprocess;

/// Reads a uint8 .npy array (the fixture's format): shape and bytes.
fn read_npy_u8(path: &Path) -> (Vec<usize>, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
    };
    let header = std::str::from_utf8(&bytes[start..start + header_len]).unwrap();
    assert!(header.contains("'descr': '|u1'"), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    let shape_text = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let shape: Vec<usize> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (shape, bytes[start + header_len..].to_vec())
}

#[test]
fn imagenet_preset_parity_with_torchvision() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parity");
    let pre = Preprocess::imagenet().unnormalized();
    let mut checked = 0;
    let mut worst = 0f32;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let jpg = entry.unwrap().path();
        if jpg.extension().and_then(|e| e.to_str()) != Some("jpg") {
            continue;
        }
        let (shape, reference) = read_npy_u8(&jpg.with_extension("npy"));
        assert_eq!(shape, vec![224, 224, 3]);
        let bytes = std::fs::read(&jpg).unwrap();
        let img = decode_rgb(&bytes).unwrap();
        let mut ours = vec![0f32; 3 * 224 * 224];
        pre.apply(&img, &mut ours).unwrap();
        // The loader's path (resizing rows as they are decoded) gives the same floats.
        let mut streamed = vec![0f32; 3 * 224 * 224];
        pre.apply_encoded(&bytes, &mut streamed).unwrap();
        assert!(ours == streamed, "{}: apply_encoded differs", jpg.display());
        let plane = 224 * 224;
        let mut max_err = 0f32;
        let mut sum_err = 0f64;
        let mut over_1 = 0;
        let mut worst_at = (0, 0, 0);
        for (p, px) in reference.chunks_exact(3).enumerate() {
            for c in 0..3 {
                let err = (ours[c * plane + p] - px[c] as f32 / 255.0).abs();
                if err > max_err {
                    max_err = err;
                    worst_at = (p / 224, p % 224, c);
                }
                if err > 1.5 / 255.0 {
                    over_1 += 1;
                }
                sum_err += err as f64;
            }
        }
        println!(
            "{}: max |error| {:.2}/255 at (y, x, c) {worst_at:?}, mean {:.3}/255, {over_1} of {} elements off by more than 1/255",
            jpg.file_name().unwrap().to_string_lossy(),
            max_err * 255.0,
            sum_err / (3 * plane) as f64 * 255.0,
            3 * plane
        );
        assert!(
            max_err <= 2.0 / 255.0 + 1e-6,
            "{}: max error {} × 1/255, over the 2/255 target",
            jpg.display(),
            max_err * 255.0
        );
        // What is measured is stronger: the 8-bit crop is PIL's, byte for byte. A change of
        // decoder settings (IDCT, upsampling) or of the resampling arithmetic shows up here.
        let crop = pre.crop_rgb(&img).unwrap();
        let differing = crop.iter().zip(&reference).filter(|(a, b)| a != b).count();
        assert_eq!(
            differing,
            0,
            "{}: {differing} bytes differ from PIL's crop",
            jpg.display()
        );
        worst = worst.max(max_err);
        checked += 1;
    }
    assert_eq!(checked, 6, "the fixture has six photos");
    println!(
        "worst max |error| over the fixture: {:.2}/255",
        worst * 255.0
    );
}
