//! Image decoding to 8-bit RGB: JPEG through `zune-jpeg`, PNG through `png`.
//!
//! Grayscale is replicated to three channels, CMYK/YCCK JPEGs are converted by the decoder,
//! alpha is dropped (as PIL's `convert("RGB")` does), palettes are expanded and 16-bit
//! samples are cut to their high byte.

use anyhow::{anyhow, bail, Context, Result};
use std::io::Cursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

/// Largest width or height trtkit decodes (a guard against absurd headers).
pub const MAX_SIDE: usize = 1 << 15;

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
pub enum Format {
    /// JPEG (baseline and progressive).
    Jpeg,
    /// PNG.
    Png,
}

/// Tells the format from the first bytes of a file.
pub fn sniff(bytes: &[u8]) -> Option<Format> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(Format::Jpeg)
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Format::Png)
    } else {
        None
    }
}

/// Decodes a JPEG or PNG held in memory to RGB. The error says what is wrong, without the path.
pub fn decode_rgb(bytes: &[u8]) -> Result<RgbImage> {
    match sniff(bytes) {
        Some(Format::Jpeg) => decode_jpeg(bytes),
        Some(Format::Png) => decode_png(bytes),
        None if bytes.is_empty() => bail!("empty file"),
        None => bail!("not a JPEG or PNG file"),
    }
}

fn decode_jpeg(bytes: &[u8]) -> Result<RgbImage> {
    let options = DecoderOptions::default()
        .jpeg_set_out_colorspace(ColorSpace::RGB)
        .set_max_width(MAX_SIDE)
        .set_max_height(MAX_SIDE);
    let mut decoder = zune_jpeg::JpegDecoder::new_with_options(Cursor::new(bytes), options);
    let pixels = decoder
        .decode()
        .map_err(|e| anyhow!("JPEG decode failed: {e:?}"))?;
    let info = decoder
        .info()
        .ok_or_else(|| anyhow!("JPEG decode failed: no header"))?;
    let (width, height) = (info.width as usize, info.height as usize);
    if pixels.len() != width * height * 3 {
        bail!(
            "JPEG decode gave {} bytes for {width}×{height} RGB",
            pixels.len()
        );
    }
    Ok(RgbImage {
        width,
        height,
        pixels,
    })
}

fn decode_png(bytes: &[u8]) -> Result<RgbImage> {
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().context("PNG decode failed")?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| anyhow!("PNG image too large"))?;
    let mut buf = vec![0u8; size];
    let frame = reader.next_frame(&mut buf).context("PNG decode failed")?;
    let (width, height) = (frame.width as usize, frame.height as usize);
    if width > MAX_SIDE || height > MAX_SIDE {
        bail!("PNG image {width}×{height} is larger than {MAX_SIDE} on a side");
    }
    let channels = match frame.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => bail!("PNG palette was not expanded"),
    };
    if frame.bit_depth != png::BitDepth::Eight {
        bail!("PNG bit depth {:?} was not expanded to 8", frame.bit_depth);
    }
    let mut pixels = Vec::with_capacity(width * height * 3);
    for row in buf.chunks(frame.line_size).take(height) {
        for px in row[..width * channels].chunks_exact(channels) {
            match channels {
                1 | 2 => pixels.extend_from_slice(&[px[0], px[0], px[0]]),
                _ => pixels.extend_from_slice(&px[..3]),
            }
        }
    }
    Ok(RgbImage {
        width,
        height,
        pixels,
    })
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
}
