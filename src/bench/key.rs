//! What makes two cells the same cell: a journal line with the same key is a cell already
//! measured, so a re-run skips it.

use super::target::Target;
use crate::trt::engine_file::Precision;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The identity of one cell of the matrix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellKey {
    /// SHA-256 of the ONNX model file (its content, not its path).
    pub model_sha256: String,
    /// The precision rewrite.
    pub precision: Precision,
    /// Samples per inference.
    pub batch: usize,
    /// The runtime.
    pub target: Target,
    /// The trtkit version that measured it.
    pub trtkit_version: String,
    /// The GPU of the machine (`none` without one).
    pub gpu: String,
    /// A digest of every other setting that changes the numbers (iterations, dataset, limit,
    /// comparison, calibration data, time limit), so a changed setting is a new cell.
    pub settings: String,
}

impl CellKey {
    /// A short, stable name for the key: 16 hex digits of the SHA-256 of its JSON.
    pub fn id(&self) -> String {
        let json = serde_json::to_vec(self).expect("a key serializes");
        hex16(&json)
    }
}

/// How people name a cell: `model/precision/bBATCH/target` (`resnet50/fp16/b32/trt`).
pub fn cell_label(model: &str, key: &CellKey) -> String {
    format!("{model}/{}/b{}/{}", key.precision, key.batch, key.target)
}

/// The first 16 hex digits of the SHA-256 of `bytes`.
pub fn hex16(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CellKey {
        CellKey {
            model_sha256: "ab".repeat(32),
            precision: Precision::Fp16,
            batch: 4,
            target: Target::TractCpu,
            trtkit_version: "0.1.0".into(),
            gpu: "none".into(),
            settings: "0123".into(),
        }
    }

    #[test]
    fn every_field_changes_the_id() {
        let base = key().id();
        assert_eq!(base.len(), 16);
        assert_eq!(base, key().id());
        let variants = [
            CellKey { batch: 8, ..key() },
            CellKey {
                precision: Precision::Int8,
                ..key()
            },
            CellKey {
                target: Target::OrtCpu,
                ..key()
            },
            CellKey {
                gpu: "NVIDIA H200".into(),
                ..key()
            },
            CellKey {
                trtkit_version: "0.2.0".into(),
                ..key()
            },
            CellKey {
                settings: "4567".into(),
                ..key()
            },
            CellKey {
                model_sha256: "cd".repeat(32),
                ..key()
            },
        ];
        for v in variants {
            assert_ne!(v.id(), base, "{v:?}");
        }
    }
}
