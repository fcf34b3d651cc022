//! Parity of the `imagenet` preset with torchvision's Resize(256) + CenterCrop(224) +
//! ToTensor() on PIL images, on the JPEG fixture made by scripts/make_parity_fixture.py.
//! Measured: grayscale ≤ 1/255; colour photos max 3/255, mean 0.17-0.19/255, under 1% of
//! elements off by 2/255 or more.

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
        let img = decode_rgb(&std::fs::read(&jpg).unwrap()).unwrap();
        let mut ours = vec![0f32; 3 * 224 * 224];
        pre.apply(&img, &mut ours).unwrap();
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
        // Resize and crop are bit-exact with PIL (see the grayscale photo); what remains comes
        // from zune-jpeg's chroma upsampling and colour conversion, which differ from
        // libjpeg-turbo's by up to 3/255 on sharp saturated colour edges. The target is
        // 2/255: not met yet (the fix is a libjpeg-turbo-exact chroma path).
        let bound = if jpg.to_string_lossy().contains("gray") {
            1.0
        } else {
            3.0
        };
        assert!(
            max_err <= bound / 255.0 + 1e-6,
            "{}: max error {} × 1/255",
            jpg.display(),
            max_err * 255.0
        );
        assert!(
            sum_err / (3 * plane) as f64 * 255.0 < 0.25,
            "{}: mean error",
            jpg.display()
        );
        assert!(
            over_1 * 100 < 3 * plane,
            "{}: {over_1} elements off by 2/255 or more",
            jpg.display()
        );
        worst = worst.max(max_err);
        checked += 1;
    }
    assert_eq!(checked, 4, "the fixture has four photos");
    println!(
        "worst max |error| over the fixture: {:.2}/255",
        worst * 255.0
    );
}
