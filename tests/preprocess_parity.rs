//! Parity of the `imagenet` preset with torchvision's Resize(256) + CenterCrop(224) +
//! ToTensor() on PIL images, on the JPEG fixture made by scripts/make_parity_fixture.py.

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
fn imagenet_preset_matches_torchvision_within_2_over_255() {
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
        for (p, px) in reference.chunks_exact(3).enumerate() {
            for c in 0..3 {
                let err = (ours[c * plane + p] - px[c] as f32 / 255.0).abs();
                max_err = max_err.max(err);
                sum_err += err as f64;
            }
        }
        println!(
            "{}: max |error| {:.2}/255, mean {:.3}/255",
            jpg.file_name().unwrap().to_string_lossy(),
            max_err * 255.0,
            sum_err / (3 * plane) as f64 * 255.0
        );
        assert!(
            max_err <= 2.0 / 255.0 + 1e-6,
            "{}: max error {} × 1/255",
            jpg.display(),
            max_err * 255.0
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
