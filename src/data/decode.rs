//! Image decoding to 8-bit RGB: JPEG through libjpeg-turbo's decoder (the `mozjpeg` crate,
//! built from source and linked statically), PNG through `png`.
//!
//! Why libjpeg-turbo: it is the decoder PIL uses, so with its defaults (accurate integer IDCT,
//! "fancy" triangle chroma upsampling, its YCbCr→RGB tables) trtkit sees the same pixels as
//! torchvision's PIL path, byte for byte (zune-jpeg, used before, differed by up to 3/255), and
//! its SIMD code (built when `nasm` is present) keeps it fast. The `mozjpeg` crate (rather
//! than `turbojpeg`, which needs cmake) wraps the C library without `unsafe` on our
//! side; its fatal errors unwind to [`decode_rows`], which turns them into `Err`. Without
//! `nasm` the same C code is built without SIMD: slower, same pixels.
//!
//! Grayscale is replicated to three channels, CMYK/YCCK JPEGs are read as Adobe-inverted CMYK
//! and converted as PIL's `convert("RGB")` does, alpha is dropped (as PIL's `convert("RGB")`
//! does), palettes are expanded and 16-bit samples are cut to their high byte.

use super::png_rows::decode_png_rows;
pub use super::row_sink::RowSink;
pub(crate) use super::row_sink::MAX_SIDE;
use anyhow::{anyhow, bail, Result};
use mozjpeg::ColorSpace;
use std::cell::Cell;
use std::io::{BufRead, Read};
use std::rc::Rc;

/// The JPEG decoder compiled into this binary (what `doctor` reports).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JpegDecoder {
    /// The library.
    pub library: String,
    /// Whether it was built with its SIMD code (`None`: the build could not tell).
    pub simd: Option<bool>,
}

/// The JPEG decoder of this build: libjpeg-turbo, with its SIMD code only if `nasm` was
/// installed when it was compiled (found by build.rs in the generated jconfig.h).
pub fn jpeg_decoder() -> JpegDecoder {
    JpegDecoder {
        library: "libjpeg-turbo (mozjpeg-sys)".into(),
        simd: match env!("TRTKIT_JPEG_SIMD") {
            "yes" => Some(true),
            "no" => Some(false),
            _ => None,
        },
    }
}

/// An 8-bit RGB image, rows top to bottom, pixels interleaved `RGBRGB…`.
#[derive(Clone, Debug, PartialEq)]
pub struct RgbImage {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `width * height * 3` bytes.
    pub pixels: Vec<u8>,
}

/// The container formats trtkit decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// JPEG (baseline and progressive).
    Jpeg,
    /// PNG.
    Png,
}

/// Tells the format from the first bytes of a file.
pub(crate) fn sniff(bytes: &[u8]) -> Option<Format> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(Format::Jpeg)
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Format::Png)
    } else {
        None
    }
}

/// Collects every row into an [`RgbImage`].
#[derive(Default)]
struct Collect(Option<RgbImage>);

impl RowSink for Collect {
    fn begin(&mut self, width: usize, height: usize) -> Result<usize> {
        self.0 = Some(RgbImage {
            width,
            height,
            pixels: Vec::with_capacity(width * height * 3),
        });
        Ok(height)
    }

    fn row(&mut self, _y: usize, rgb: &[u8]) {
        if let Some(img) = &mut self.0 {
            img.pixels.extend_from_slice(rgb);
        }
    }
}

/// Decodes a JPEG or PNG held in memory to RGB. The error says what is wrong, without the path.
pub fn decode_rgb(bytes: &[u8]) -> Result<RgbImage> {
    let mut sink = Collect::default();
    decode_rows(bytes, &mut sink)?;
    sink.0.ok_or_else(|| anyhow!("decoder gave no image"))
}

/// Decodes a JPEG or PNG held in memory, handing its RGB rows to `sink`. A JPEG is decoded
/// only down to the last row the sink asks for. The error says what is wrong, without the path.
pub fn decode_rows(bytes: &[u8], sink: &mut impl RowSink) -> Result<()> {
    match sniff(bytes) {
        Some(Format::Jpeg) => decode_jpeg(bytes, sink),
        Some(Format::Png) => decode_png_rows(bytes, sink),
        None if bytes.is_empty() => bail!("empty file"),
        None => bail!("not a JPEG or PNG file"),
    }
}

/// The prefix of the messages that the `mozjpeg` crate unwinds with on a libjpeg error.
const LIBJPEG_ERROR: &str = "libjpeg fatal error: ";

/// Runs the libjpeg decode, turning libjpeg's unwinding errors into `Err` (any other panic
/// goes on unwinding: it is a bug, not bad input).
fn decode_jpeg(bytes: &[u8], sink: &mut impl RowSink) -> Result<()> {
    let ran_out = Rc::new(Cell::new(false));
    let source = Source {
        data: bytes,
        ran_out: ran_out.clone(),
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decode_jpeg_unwinding(source, sink)
    }));
    let result = match result {
        Ok(r) => r,
        Err(payload) => match payload.downcast::<String>() {
            Ok(msg) if msg.starts_with(LIBJPEG_ERROR) => Err(anyhow!(
                "JPEG decode failed: {}",
                &msg[LIBJPEG_ERROR.len()..]
            )),
            Ok(msg) => std::panic::resume_unwind(msg),
            Err(payload) => std::panic::resume_unwind(payload),
        },
    };
    if ran_out.get() {
        // libjpeg pads a truncated stream with an end marker and only warns; PIL refuses it.
        bail!("JPEG data ends early (truncated file)");
    }
    result
}

/// Rows decoded into one buffer before any is handed on. Decoding every row into the same
/// single-row buffer and resizing it at once was slow on both sides: on one core the decode
/// alone went from 1300 to 1610 images/s with batches, and the horizontal resize pass from
/// about 0.35 to 0.1 ms an image (memory stalls on the freshly written row; whether store
/// forwarding or 4 KiB aliasing with the decoder's own buffers, was not pinned down).
const ROWS_PER_READ: usize = 16;

fn decode_jpeg_unwinding(source: Source<'_>, sink: &mut impl RowSink) -> Result<()> {
    let mut header =
        mozjpeg::Decompress::new_reader(source).map_err(|e| anyhow!("JPEG decode failed: {e}"))?;
    // libjpeg's defaults, which PIL keeps; set here so that the parity does not hang on them.
    header.dct_method(mozjpeg::DctMethod::IntegerSlow);
    header.do_fancy_upsampling(true);
    let (width, height) = header.size();
    if width == 0 || height == 0 {
        bail!("JPEG image is {width}×{height}");
    }
    if width > MAX_SIDE || height > MAX_SIDE {
        bail!("JPEG image {width}×{height} is larger than {MAX_SIDE} on a side");
    }
    let cmyk = matches!(
        header.color_space(),
        ColorSpace::JCS_CMYK | ColorSpace::JCS_YCCK
    );
    let rows = sink.begin(width, height)?.min(height);
    if rows == 0 {
        return Ok(());
    }
    let mut started = if cmyk {
        header.to_colorspace(ColorSpace::JCS_CMYK)
    } else {
        header.rgb()
    }
    .map_err(|e| anyhow!("JPEG decode failed: {e}"))?;
    if (started.width(), started.height()) != (width, height) {
        bail!(
            "JPEG decoder changed the size to {}×{}",
            started.width(),
            started.height()
        );
    }
    let line_len = width * if cmyk { 4 } else { 3 };
    let mut lines = vec![0u8; line_len * ROWS_PER_READ];
    let mut rgb = if cmyk {
        vec![0u8; width * 3]
    } else {
        Vec::new()
    };
    for first in (0..rows).step_by(ROWS_PER_READ) {
        let n = ROWS_PER_READ.min(rows - first);
        let batch = &mut lines[..n * line_len];
        started
            .read_scanlines_into::<u8>(batch)
            .map_err(|e| anyhow!("JPEG decode failed at row {first}: {e}"))?;
        for (y, line) in (first..).zip(batch.chunks_exact(line_len)) {
            if cmyk {
                cmyk_to_rgb(line, &mut rgb);
                sink.row(y, &rgb);
            } else {
                sink.row(y, line);
            }
        }
    }
    Ok(())
}

/// CMYK as libjpeg delivers it → RGB, as PIL does it: PIL's JPEG reader takes the samples as
/// Adobe-inverted (ink = 255 - sample), then `convert("RGB")` computes, with `x = 255 - k`,
/// each channel as `x - round(ink * x / 255)` in its integer arithmetic.
fn cmyk_to_rgb(cmyk: &[u8], rgb: &mut [u8]) {
    for (o, px) in rgb.chunks_exact_mut(3).zip(cmyk.chunks_exact(4)) {
        let nk = px[3] as u32; // 255 - ink k
        for c in 0..3 {
            let t = (255 - px[c] as u32) * nk + 128;
            o[c] = (nk - (((t >> 8) + t) >> 8)) as u8;
        }
    }
}

/// The JPEG bytes as libjpeg reads them, noting whether it asked for more than there is.
struct Source<'a> {
    data: &'a [u8],
    ran_out: Rc<Cell<bool>>,
}

impl Read for Source<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.data.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.ran_out.set(true);
        }
        Ok(n)
    }
}

impl BufRead for Source<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.data.is_empty() {
            self.ran_out.set(true);
        }
        Ok(self.data)
    }

    fn consume(&mut self, amt: usize) {
        self.data = &self.data[amt.min(self.data.len())..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png_bytes(color: png::ColorType, w: u32, h: u32, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, w, h);
            enc.set_color(color);
            enc.set_depth(png::BitDepth::Eight);
            let mut writer = enc.write_header().unwrap();
            writer.write_image_data(data).unwrap();
        }
        out
    }

    #[test]
    fn png_gray_and_alpha_become_rgb() {
        let gray = decode_rgb(&png_bytes(png::ColorType::Grayscale, 2, 1, &[7, 200])).unwrap();
        assert_eq!(gray.pixels, vec![7, 7, 7, 200, 200, 200]);
        let rgba = decode_rgb(&png_bytes(
            png::ColorType::Rgba,
            1,
            2,
            &[1, 2, 3, 0, 4, 5, 6, 255],
        ))
        .unwrap();
        assert_eq!((rgba.width, rgba.height), (1, 2));
        assert_eq!(rgba.pixels, vec![1, 2, 3, 4, 5, 6]);
        let ga = decode_rgb(&png_bytes(png::ColorType::GrayscaleAlpha, 1, 1, &[9, 0])).unwrap();
        assert_eq!(ga.pixels, vec![9, 9, 9]);
    }

    fn jpeg_bytes(color: jpeg_encoder::ColorType, w: u16, h: u16, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        jpeg_encoder::Encoder::new(&mut out, 95)
            .encode(data, w, h, color)
            .unwrap();
        out
    }

    #[test]
    fn jpeg_gray_and_cmyk_become_rgb() {
        let gray =
            decode_rgb(&jpeg_bytes(jpeg_encoder::ColorType::Luma, 8, 8, &[128; 64])).unwrap();
        assert_eq!(gray.pixels.len(), 8 * 8 * 3);
        assert!(gray.pixels.iter().all(|&v| v.abs_diff(128) <= 2));
        // CMYK with only cyan ink: red is low, green and blue high.
        let cmyk: Vec<u8> = (0..64).flat_map(|_| [200u8, 0, 0, 0]).collect();
        let img = decode_rgb(&jpeg_bytes(jpeg_encoder::ColorType::Cmyk, 8, 8, &cmyk)).unwrap();
        let px = &img.pixels[..3];
        assert!(px[0] < 90 && px[1] > 200 && px[2] > 200, "{px:?}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_rgb(b"").unwrap_err().to_string().contains("empty"));
        assert!(decode_rgb(b"hello")
            .unwrap_err()
            .to_string()
            .contains("not a JPEG"));
        let mut truncated = jpeg_bytes(jpeg_encoder::ColorType::Rgb, 16, 16, &[90; 768]);
        truncated.truncate(40);
        assert!(decode_rgb(&truncated).is_err());
        assert!(decode_rgb(b"\x89PNG\r\n\x1a\nxxxx").is_err());
    }

    fn noisy_rgb(w: usize, h: usize) -> Vec<u8> {
        (0..w * h * 3).map(|i| ((i * 7919) % 251) as u8).collect()
    }

    #[test]
    fn libjpeg_errors_come_back_as_errors() {
        // A frame header with an impossible length: libjpeg's error_exit unwinds through C
        // into decode_rows, which must turn it into an Err carrying libjpeg's message.
        let mut bytes = vec![0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x01];
        bytes.extend_from_slice(&[0u8; 64]);
        let err = decode_rgb(&bytes).unwrap_err().to_string();
        assert!(err.starts_with("JPEG decode failed: "), "{err}");
        assert!(err.len() > "JPEG decode failed: ".len() + 5, "{err}");
        assert!(!err.contains("truncated"), "{err}");
    }

    #[test]
    fn truncated_scan_is_an_error() {
        let jpeg = jpeg_bytes(jpeg_encoder::ColorType::Rgb, 64, 64, &noisy_rgb(64, 64));
        assert!(decode_rgb(&jpeg).is_ok());
        let err = decode_rgb(&jpeg[..jpeg.len() * 2 / 3]).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
    }

    /// Takes the first `want` rows only.
    struct FirstRows {
        want: usize,
        rows: Vec<Vec<u8>>,
    }

    impl RowSink for FirstRows {
        fn begin(&mut self, _w: usize, _h: usize) -> Result<usize> {
            Ok(self.want)
        }
        fn row(&mut self, y: usize, rgb: &[u8]) {
            assert_eq!(y, self.rows.len());
            self.rows.push(rgb.to_vec());
        }
    }

    #[test]
    fn a_sink_can_stop_early_with_the_same_rows() {
        let jpeg = jpeg_bytes(jpeg_encoder::ColorType::Rgb, 40, 50, &noisy_rgb(40, 50));
        let full = decode_rgb(&jpeg).unwrap();
        let mut first = FirstRows {
            want: 21,
            rows: Vec::new(),
        };
        decode_rows(&jpeg, &mut first).unwrap();
        assert_eq!(first.rows.concat(), full.pixels[..21 * 40 * 3]);
        // A sink that refuses the image ends the decode with its error.
        struct Refuse;
        impl RowSink for Refuse {
            fn begin(&mut self, w: usize, h: usize) -> Result<usize> {
                bail!("{w}×{h} refused")
            }
            fn row(&mut self, _: usize, _: &[u8]) {}
        }
        let err = decode_rows(&jpeg, &mut Refuse).unwrap_err();
        assert_eq!(err.to_string(), "40×50 refused");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// libjpeg reports errors by unwinding; none of that may escape as a panic.
        #[test]
        fn damaged_jpegs_never_panic(
            cut in 0usize..100_000,
            flips in proptest::collection::vec((0usize..100_000, 0u8..8), 0..6),
        ) {
            let mut jpeg = jpeg_bytes(jpeg_encoder::ColorType::Rgb, 24, 16, &noisy_rgb(24, 16));
            let len = jpeg.len();
            for (pos, bit) in flips {
                jpeg[pos % len] ^= 1 << bit;
            }
            jpeg.truncate(len - cut % len);
            if let Err(err) = decode_rgb(&jpeg) {
                let text = format!("{err:#}");
                proptest::prop_assert!(!text.is_empty() && !text.contains('\n'), "{}", text);
            }
        }
    }
}
