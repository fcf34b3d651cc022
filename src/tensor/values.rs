//! The values an integer input may take, for making inputs a model accepts: token ids inside
//! the vocabulary, attention masks, segment ids.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What values an integer input takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum IntInput {
    /// Uniform in `[low, high)`.
    Range {
        /// Smallest value.
        low: i64,
        /// One past the largest value.
        high: i64,
    },
    /// An attention mask: each row ones, then a run of padding zeros at its end (a random
    /// length, at most half the row).
    Mask,
    /// All zeros (segment / token type ids of a single-segment input).
    Zeros,
}

impl fmt::Display for IntInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntInput::Range { low, high } => write!(f, "integers in [{low}, {high})"),
            IntInput::Mask => f.write_str("attention mask (ones, then padding zeros)"),
            IntInput::Zeros => f.write_str("zeros"),
        }
    }
}
