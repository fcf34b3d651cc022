//! Ground-truth masks for segmentation validation: reading PNG label maps
//! (grayscale values or raw palette indices) and sampling them through the
//! same resize-then-crop window as the images they belong to.

use super::resize::Window;
use anyhow::{anyhow, bail, Result};
use png::{BitDepth, ColorType, Decoder, Transformations};
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// A mask image: one class label per pixel, row-major.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LabelMap {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `width × height` class labels, row by row.
    pub labels: Vec<u32>,
}

/// Reads a PNG mask: 8- or 16-bit grayscale (the value is the class), or a palette PNG (the palette index is the class, as PASCAL VOC stores them).
///
/// Palettes are not expanded: indices stay raw, and packed 1/2/4-bit samples
/// are unpacked. Gray+alpha masks use the gray channel. RGB and RGBA masks are
/// refused, as is anything that is not a readable PNG; each error names the file.
pub(crate) fn read_mask(path: &Path) -> Result<LabelMap> {
    let shown = path.display();
    let file = File::open(path).map_err(|e| anyhow!("{shown}: cannot open the mask: {e}"))?;
    let mut decoder = Decoder::new(BufReader::new(file));
    decoder.set_transformations(Transformations::IDENTITY);
    let mut reader = decoder
        .read_info()
        .map_err(|e| anyhow!("{shown}: not a readable PNG mask: {e}"))?;
    let (color, depth) = reader.output_color_type();
    let channels = match color {
        ColorType::Grayscale | ColorType::Indexed => 1,
        ColorType::GrayscaleAlpha => 2,
        ColorType::Rgb | ColorType::Rgba => bail!(
            "{shown}: an RGB mask; masks must be grayscale or palette PNGs whose values are class indices"
        ),
    };
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| anyhow!("{shown}: the mask is too large to decode"))?;
    let mut buf = vec![0u8; size];
    let frame = reader
        .next_frame(&mut buf)
        .map_err(|e| anyhow!("{shown}: cannot decode the mask: {e}"))?;
    let (width, height) = (frame.width as usize, frame.height as usize);
    let mut labels = Vec::with_capacity(width * height);
    for row in buf.chunks(frame.line_size.max(1)).take(height) {
        unpack_row(row, width, depth, channels, &mut labels);
    }
    if labels.len() != width * height {
        bail!("{shown}: the mask's pixel data is shorter than its {width}×{height} size");
    }
    Ok(LabelMap {
        width,
        height,
        labels,
    })
}

/// A mask's width and height, from its PNG header alone (nothing is decoded); an error names
/// the file.
pub(crate) fn mask_size(path: &Path) -> Result<(u32, u32)> {
    let shown = path.display();
    let file = File::open(path).map_err(|e| anyhow!("{shown}: cannot open the mask: {e}"))?;
    let reader = Decoder::new(BufReader::new(file))
        .read_info()
        .map_err(|e| anyhow!("{shown}: not a readable PNG mask: {e}"))?;
    let info = reader.info();
    Ok((info.width, info.height))
}

/// Appends the first channel of each of `width` pixels of one decoded row.
fn unpack_row(row: &[u8], width: usize, depth: BitDepth, channels: usize, out: &mut Vec<u32>) {
    match depth {
        BitDepth::Sixteen => out.extend(
            row.chunks_exact(2 * channels)
                .take(width)
                .map(|px| u32::from(u16::from_be_bytes([px[0], px[1]]))),
        ),
        BitDepth::Eight => out.extend(
            row.chunks_exact(channels)
                .take(width)
                .map(|px| u32::from(px[0])),
        ),
        BitDepth::One | BitDepth::Two | BitDepth::Four => {
            let bits = depth as usize;
            let mask = (1u8 << bits) - 1;
            let per_byte = 8 / bits;
            out.extend(
                row.iter()
                    .flat_map(|&byte| {
                        (0..per_byte).map(move |i| (byte >> (8 - bits * (i + 1))) & mask)
                    })
                    .take(width)
                    .map(u32::from),
            );
        }
    }
}

impl LabelMap {
    /// The labels seen through a resize-then-crop window, nearest neighbour, as an `out_w × out_h` row-major grid.
    ///
    /// Output pixel (x, y) covers the crop `window.width × window.height` at
    /// (`window.left`, `window.top`) of the image resized to
    /// `window.resized_w × window.resized_h`, and takes the mask pixel at
    /// `floor((left + (x + 0.5) * width / out_w) * self.width / resized_w)`
    /// (same for y), clamped into the mask. Empty when the output grid is
    /// empty, the mask is empty, or its labels don't fill `width × height`.
    pub(crate) fn sample_window(&self, window: &Window, out_w: usize, out_h: usize) -> Vec<u32> {
        if self.width == 0 || self.height == 0 || self.labels.len() != self.width * self.height {
            return Vec::new();
        }
        let columns: Vec<usize> = (0..out_w)
            .map(|x| {
                source_index(
                    x,
                    window.left,
                    window.width,
                    out_w,
                    self.width,
                    window.resized_w,
                )
            })
            .collect();
        let mut out = Vec::with_capacity(out_w * out_h);
        for y in 0..out_h {
            let sy = source_index(
                y,
                window.top,
                window.height,
                out_h,
                self.height,
                window.resized_h,
            );
            let row = &self.labels[sy * self.width..(sy + 1) * self.width];
            out.extend(columns.iter().map(|&sx| row[sx]));
        }
        out
    }
}

/// The mask coordinate for output coordinate `i` along one axis, clamped into `0..mask_len`.
fn source_index(
    i: usize,
    start: usize,
    crop: usize,
    out: usize,
    mask_len: usize,
    resized: usize,
) -> usize {
    let in_resized = start as f64 + (i as f64 + 0.5) * crop as f64 / out as f64;
    let pos = (in_resized * mask_len as f64 / resized as f64).floor();
    // `as` saturates: NaN and negatives give 0, infinities the largest usize.
    (pos as usize).min(mask_len - 1)
}

#[cfg(test)]
mod tests;
