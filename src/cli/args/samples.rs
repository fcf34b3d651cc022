//! `--num-samples`: the one name for "how many samples" (random inputs of `compare`, images of
//! `validate`, calibration images of `calibrate` and `build --int8`).
//!
//! The old names stay as hidden aliases for one release: `--num-inputs` (compare), `--limit`
//! (validate) and `--num-images` (calibrate, build).

use crate::cli::usage;
use anyhow::Result;

/// Refuses a sample count of zero, naming the flag.
pub(crate) fn positive_samples(n: Option<usize>) -> Result<Option<usize>> {
    match n {
        Some(0) => Err(usage("--num-samples must be at least 1")),
        other => Ok(other),
    }
}
