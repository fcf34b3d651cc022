//! Tests of mask reading (PNGs written here with the png crate) and window sampling.

use super::*;
use std::path::PathBuf;

/// A scratch folder under the system temp dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("segcheck-masks-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes a PNG with the given header and already packed rows.
fn write_png(
    path: &Path,
    (w, h): (u32, u32),
    color: ColorType,
    depth: BitDepth,
    palette: Option<Vec<u8>>,
    data: &[u8],
) {
    let file = File::create(path).unwrap();
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    encoder.set_color(color);
    encoder.set_depth(depth);
    if let Some(palette) = palette {
        encoder.set_palette(palette);
    }
    let mut writer = encoder.write_header().unwrap();
    writer.write_image_data(data).unwrap();
    writer.finish().unwrap();
}

/// Packs labels of `bits` each, rows padded to whole bytes, high bits first.
fn pack(labels: &[u32], width: usize, bits: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for row in labels.chunks(width) {
        let mut byte = 0u8;
        let mut used = 0;
        for &label in row {
            byte |= (label as u8) << (8 - bits - used);
            used += bits;
            if used == 8 {
                out.push(byte);
                (byte, used) = (0, 0);
            }
        }
        if used > 0 {
            out.push(byte);
        }
    }
    out
}

/// Labels of a `w × h` test mask with values below `levels`.
fn pattern(w: usize, h: usize, levels: u32) -> Vec<u32> {
    (0..w * h)
        .map(|i| (i as u32 * 7 + i as u32 / 3) % levels)
        .collect()
}

#[test]
fn reads_gray_8_and_16_bit() {
    let dir = Scratch::new("gray");
    let (w, h) = (5, 3);
    let labels = pattern(w, h, 21);
    let path = dir.0.join("g8.png");
    let bytes: Vec<u8> = labels.iter().map(|&l| l as u8).collect();
    write_png(
        &path,
        (5, 3),
        ColorType::Grayscale,
        BitDepth::Eight,
        None,
        &bytes,
    );
    let map = read_mask(&path).unwrap();
    assert_eq!((map.width, map.height), (w, h));
    assert_eq!(map.labels, labels);

    let wide: Vec<u32> = labels.iter().map(|&l| l * 1000 + 255).collect();
    let bytes: Vec<u8> = wide
        .iter()
        .flat_map(|&l| (l as u16).to_be_bytes())
        .collect();
    let path = dir.0.join("g16.png");
    write_png(
        &path,
        (5, 3),
        ColorType::Grayscale,
        BitDepth::Sixteen,
        None,
        &bytes,
    );
    assert_eq!(read_mask(&path).unwrap().labels, wide);
}

#[test]
fn reads_palette_indices_not_colours() {
    let dir = Scratch::new("palette");
    let (w, h) = (7, 3);
    for (depth, bits) in [
        (BitDepth::Eight, 8),
        (BitDepth::Four, 4),
        (BitDepth::Two, 2),
        (BitDepth::One, 1),
    ] {
        let levels = 1u32 << bits.min(5);
        let labels = pattern(w, h, levels);
        // A VOC-like palette whose colours differ from the indices.
        let palette: Vec<u8> = (0..levels)
            .flat_map(|i| [(i * 37 % 256) as u8, 128, 200])
            .collect();
        let path = dir.0.join(format!("p{bits}.png"));
        let data = pack(&labels, w, bits);
        write_png(
            &path,
            (7, 3),
            ColorType::Indexed,
            depth,
            Some(palette),
            &data,
        );
        let map = read_mask(&path).unwrap();
        assert_eq!((map.width, map.height), (w, h), "{bits}-bit");
        assert_eq!(map.labels, labels, "{bits}-bit");
    }
}

#[test]
fn reads_gray_channel_of_gray_alpha() {
    let dir = Scratch::new("ga");
    let path = dir.0.join("ga.png");
    write_png(
        &path,
        (3, 1),
        ColorType::GrayscaleAlpha,
        BitDepth::Eight,
        None,
        &[4, 255, 9, 0, 2, 128],
    );
    assert_eq!(read_mask(&path).unwrap().labels, vec![4, 9, 2]);
}

#[test]
fn refuses_rgb_and_non_png() {
    let dir = Scratch::new("bad");
    let path = dir.0.join("rgb.png");
    write_png(
        &path,
        (2, 1),
        ColorType::Rgb,
        BitDepth::Eight,
        None,
        &[1, 2, 3, 4, 5, 6],
    );
    let err = read_mask(&path).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "{}: an RGB mask; masks must be grayscale or palette PNGs whose values are class indices",
            path.display()
        )
    );
    let path = dir.0.join("rgba.png");
    write_png(
        &path,
        (1, 1),
        ColorType::Rgba,
        BitDepth::Eight,
        None,
        &[1, 2, 3, 4],
    );
    let err = read_mask(&path).unwrap_err().to_string();
    assert!(err.contains("an RGB mask"), "{err}");

    let path = dir.0.join("mask.png");
    std::fs::write(&path, b"not a png at all").unwrap();
    let err = read_mask(&path).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}: ", path.display())), "{err}");
    assert!(err.contains("not a readable PNG"), "{err}");
    assert!(!err.contains('\n'), "{err}");

    let path = dir.0.join("missing.png");
    let err = read_mask(&path).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{}: cannot open", path.display())),
        "{err}"
    );
}

#[test]
fn truncated_png_is_an_error() {
    let dir = Scratch::new("trunc");
    let path = dir.0.join("t.png");
    write_png(
        &path,
        (8, 8),
        ColorType::Grayscale,
        BitDepth::Eight,
        None,
        &[3; 64],
    );
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 30]).unwrap();
    let err = read_mask(&path).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}: ", path.display())), "{err}");
}

/// An 8×8 mask whose label at (x, y) is x + 10 y.
fn grid() -> LabelMap {
    LabelMap {
        width: 8,
        height: 8,
        labels: (0..64).map(|i| (i % 8) + 10 * (i / 8)).collect(),
    }
}

fn window(resized: usize, left: usize, top: usize, crop: usize) -> Window {
    Window {
        resized_w: resized,
        resized_h: resized,
        left,
        top,
        width: crop,
        height: crop,
    }
}

#[test]
fn identity_window_returns_the_mask() {
    let map = grid();
    assert_eq!(map.sample_window(&window(8, 0, 0, 8), 8, 8), map.labels);
}

#[test]
fn downsample_by_two_picks_odd_pixels() {
    // Resized to 4×4, whole crop, 4×4 out: x -> floor((x + 0.5) * 8 / 4) = 2x + 1.
    let out = grid().sample_window(&window(4, 0, 0, 4), 4, 4);
    let want: Vec<u32> = (0..16)
        .map(|i| (2 * (i % 4) + 1) + 10 * (2 * (i / 4) + 1))
        .collect();
    assert_eq!(out, want);
}

#[test]
fn offset_crop_and_clamping() {
    // Resized to 16×16, crop 8×8 at (4, 2), 4×4 out:
    // x -> floor((4 + (x + 0.5) * 2) / 2) = x + 2; y -> floor((2 + (y + 0.5) * 2) / 2) = y + 1.
    let out = grid().sample_window(&window(16, 4, 2, 8), 4, 4);
    let want: Vec<u32> = (0..16).map(|i| (i % 4 + 2) + 10 * (i / 4 + 1)).collect();
    assert_eq!(out, want);
    // A window reaching past the resized image clamps to the last row and column.
    let out = grid().sample_window(&window(8, 6, 6, 4), 2, 2);
    assert_eq!(out, vec![77, 77, 77, 77]);
    // Degenerate inputs give an empty grid or clamp, never a panic.
    assert!(grid().sample_window(&window(8, 0, 0, 8), 0, 3).is_empty());
    assert_eq!(grid().sample_window(&window(0, 0, 0, 8), 1, 1), vec![77]);
    let broken = LabelMap {
        width: 4,
        height: 4,
        labels: vec![1; 3],
    };
    assert!(broken.sample_window(&window(4, 0, 0, 4), 2, 2).is_empty());
}
