//! PNG decoding row by row: the size is read from the header and checked before anything is
//! allocated for the pixels, and a non-interlaced image is handed to the sink one RGB row at a
//! time, so an image costs one row of memory beyond what the sink keeps (an interlaced one, its
//! whole frame, as its rows arrive out of order).

use super::row_sink::{RowSink, MAX_SIDE};
use anyhow::{anyhow, bail, Context, Result};
use std::io::Cursor;

/// The 8-bit channels of a decoded PNG row (palettes and 16-bit samples are expanded first).
fn channels(color: png::ColorType) -> Result<usize> {
    Ok(match color {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => bail!("PNG palette was not expanded"),
    })
}

/// One decoded row of `width` pixels of `channels` channels, as RGB into `rgb`.
fn to_rgb(row: &[u8], width: usize, channels: usize, rgb: &mut Vec<u8>) {
    rgb.clear();
    for px in row[..width * channels].chunks_exact(channels) {
        match channels {
            1 | 2 => rgb.extend_from_slice(&[px[0], px[0], px[0]]),
            _ => rgb.extend_from_slice(&px[..3]),
        }
    }
}

/// Decodes a PNG held in memory, handing its RGB rows to `sink` (only as many as it asks for).
pub(crate) fn decode_png_rows(bytes: &[u8], sink: &mut impl RowSink) -> Result<()> {
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().context("PNG decode failed")?;
    let (width, height) = {
        let info = reader.info();
        (info.width as usize, info.height as usize)
    };
    if width > MAX_SIDE || height > MAX_SIDE {
        bail!("PNG image {width}×{height} is larger than {MAX_SIDE} on a side");
    }
    let (color, depth) = reader.output_color_type();
    if depth != png::BitDepth::Eight {
        bail!("PNG bit depth {depth:?} was not expanded to 8");
    }
    let channels = channels(color)?;
    let rows = sink.begin(width, height)?.min(height);
    let mut rgb = Vec::with_capacity(width * 3);
    if reader.info().interlaced {
        let size = reader
            .output_buffer_size()
            .ok_or_else(|| anyhow!("PNG image too large"))?;
        let mut frame = vec![0u8; size];
        let info = reader.next_frame(&mut frame).context("PNG decode failed")?;
        for (y, row) in frame.chunks(info.line_size).take(rows).enumerate() {
            to_rgb(row, width, channels, &mut rgb);
            sink.row(y, &rgb);
        }
        return Ok(());
    }
    for y in 0..rows {
        let row = reader
            .next_row()
            .context("PNG decode failed")?
            .ok_or_else(|| anyhow!("PNG decode failed: the image ends after {y} rows"))?;
        to_rgb(row.data(), width, channels, &mut rgb);
        sink.row(y, &rgb);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::decode::decode_rgb;

    /// CRC-32 (ISO-HDLC), as PNG chunks carry it.
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut out = (data.len() as u32).to_be_bytes().to_vec();
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
        out
    }

    #[test]
    fn a_huge_header_is_refused_before_its_pixels_are_allocated() {
        // 40000 × 40000 RGBA: 6.4 GB of pixels the old decoder set aside before checking.
        let mut ihdr = 40_000u32.to_be_bytes().to_vec();
        ihdr.extend_from_slice(&40_000u32.to_be_bytes());
        ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.extend(chunk(b"IHDR", &ihdr));
        png.extend(chunk(
            b"IDAT",
            &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
        ));
        png.extend(chunk(b"IEND", &[]));
        let err = decode_rgb(&png).unwrap_err();
        assert_eq!(
            err.to_string(),
            "PNG image 40000×40000 is larger than 32768 on a side"
        );
    }
}
