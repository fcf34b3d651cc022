//! One labelled image: what every dataset layout turns its files into.

use std::path::PathBuf;

/// One labelled image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Path of the image file.
    pub path: PathBuf,
    /// Class index in the model's output.
    pub label: usize,
}
