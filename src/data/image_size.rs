//! An image's width and height from its header alone (PNG `IHDR`, JPEG start-of-frame), without
//! decoding it: fast enough to check thousands of images before a run.

use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// The width and height of the JPEG or PNG image at `path`, read from its header.
pub(crate) fn image_size(path: &Path) -> Result<(u32, u32)> {
    let file = File::open(path).with_context(|| format!("{}: cannot read", path.display()))?;
    size_of(&mut BufReader::with_capacity(4096, file))
        .with_context(|| format!("{}: cannot read the image size", path.display()))
}

/// The width and height of the JPEG or PNG image `reader` starts with.
pub(crate) fn size_of(reader: &mut (impl Read + Seek)) -> Result<(u32, u32)> {
    let mut magic = [0u8; 8];
    reader
        .read_exact(&mut magic[..3])
        .map_err(|_| anyhow!("not a JPEG or PNG image (too short)"))?;
    if magic[..3] == [0xFF, 0xD8, 0xFF] {
        return jpeg_size(reader);
    }
    reader
        .read_exact(&mut magic[3..])
        .map_err(|_| anyhow!("not a JPEG or PNG image (too short)"))?;
    if &magic == b"\x89PNG\r\n\x1a\n" {
        return png_size(reader);
    }
    bail!("not a JPEG or PNG image")
}

/// After the PNG signature: the `IHDR` chunk, which must come first.
fn png_size(reader: &mut impl Read) -> Result<(u32, u32)> {
    let mut chunk = [0u8; 16];
    reader
        .read_exact(&mut chunk)
        .map_err(|_| anyhow!("PNG header cut short"))?;
    if &chunk[4..8] != b"IHDR" {
        bail!("PNG without an IHDR chunk first");
    }
    let width = u32::from_be_bytes([chunk[8], chunk[9], chunk[10], chunk[11]]);
    let height = u32::from_be_bytes([chunk[12], chunk[13], chunk[14], chunk[15]]);
    Ok((width, height))
}

/// True for the start-of-frame markers (baseline, progressive, lossless, arithmetic), which
/// hold the image size; C4 (DHT), C8 (JPG) and CC (DAC) are not frames.
fn is_frame(marker: u8) -> bool {
    matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC)
}

/// After the first marker's `FF`: walks the segments to the first frame header.
fn jpeg_size(reader: &mut (impl Read + Seek)) -> Result<(u32, u32)> {
    let mut byte = [0u8; 1];
    let mut read_byte = |r: &mut dyn Read| -> Result<u8> {
        r.read_exact(&mut byte)
            .map_err(|_| anyhow!("JPEG ends before its frame header"))?;
        Ok(byte[0])
    };
    // The first marker after SOI: its FF is read already.
    let mut marker = read_byte(reader)?;
    loop {
        while marker == 0xFF {
            marker = read_byte(reader)?; // fill bytes
        }
        match marker {
            0xD8 | 0x01 | 0xD0..=0xD7 => {} // no length
            0xD9 | 0xDA => bail!("JPEG without a frame header before its image data"),
            _ => {
                let mut len = [0u8; 2];
                reader
                    .read_exact(&mut len)
                    .map_err(|_| anyhow!("JPEG ends before its frame header"))?;
                let len = u16::from_be_bytes(len);
                if len < 2 {
                    bail!("JPEG segment with a length of {len}");
                }
                if is_frame(marker) {
                    let mut frame = [0u8; 5];
                    reader
                        .read_exact(&mut frame)
                        .map_err(|_| anyhow!("JPEG frame header cut short"))?;
                    let height = u16::from_be_bytes([frame[1], frame[2]]);
                    let width = u16::from_be_bytes([frame[3], frame[4]]);
                    return Ok((u32::from(width), u32::from(height)));
                }
                reader.seek(SeekFrom::Current(i64::from(len) - 2))?;
            }
        }
        if read_byte(reader)? != 0xFF {
            bail!("JPEG segments are damaged (no marker where one should be)");
        }
        marker = read_byte(reader)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Eight);
        let data = vec![7u8; (w * h) as usize];
        enc.write_header().unwrap().write_image_data(&data).unwrap();
        out
    }

    fn jpeg(w: u16, h: u16) -> Vec<u8> {
        let mut out = Vec::new();
        let data = vec![90u8; usize::from(w) * usize::from(h) * 3];
        jpeg_encoder::Encoder::new(&mut out, 80)
            .encode(&data, w, h, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        out
    }

    #[test]
    fn png_and_jpeg_sizes_come_from_the_header() {
        assert_eq!(
            size_of(&mut Cursor::new(png(286, 143))).unwrap(),
            (286, 143)
        );
        assert_eq!(
            size_of(&mut Cursor::new(jpeg(286, 143))).unwrap(),
            (286, 143)
        );
        // An APP segment (as EXIF) and fill bytes before the frame are stepped over.
        let plain = jpeg(31, 17);
        let mut with_app = plain[..2].to_vec();
        with_app.extend_from_slice(&[0xFF, 0xE1, 0x00, 0x06, b'E', b'x', 0, 0, 0xFF]);
        with_app.extend_from_slice(&plain[2..]);
        assert_eq!(size_of(&mut Cursor::new(with_app)).unwrap(), (31, 17));
    }

    #[test]
    fn damaged_headers_are_errors_not_panics() {
        for bytes in [
            b"".to_vec(),
            b"GIF89a".to_vec(),
            b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0".to_vec(),
            b"\x89PNG\r\n\x1a\n\0\0\0\x0dIEND\0\0\0\0\0\0\0\0".to_vec(),
            vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00],
            vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01, 0xFF, 0xC0],
            vec![0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x04, 0, 0],
            vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x02, 0x12],
            jpeg(8, 8)[..20].to_vec(),
        ] {
            assert!(size_of(&mut Cursor::new(&bytes)).is_err(), "{bytes:?}");
        }
        let err = format!(
            "{:#}",
            image_size(Path::new("/nonexistent/x.png")).unwrap_err()
        );
        assert!(err.contains("/nonexistent/x.png: cannot read"), "{err}");
    }
}
