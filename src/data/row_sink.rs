//! Where a decoder hands an image's rows, and the largest image it decodes: shared by the JPEG
//! and PNG decoders and the preprocessing that resizes as the rows arrive.

use anyhow::Result;

/// Largest width or height trtkit decodes (a guard against absurd headers).
pub(crate) const MAX_SIDE: usize = 1 << 15;

/// Receives an image's RGB rows, top to bottom, as they are decoded.
pub trait RowSink {
    /// Called once with the image size, before any row; returns how many rows from the top
    /// are needed (decoding stops after them), or an error that ends the decode.
    fn begin(&mut self, width: usize, height: usize) -> Result<usize>;
    /// Called with row `y` (`width * 3` bytes), for each `y` below the count `begin` returned.
    fn row(&mut self, y: usize, rgb: &[u8]);
}
