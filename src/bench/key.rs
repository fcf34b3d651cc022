//! What makes two cells the same cell: a journal line with the same key is a cell already
//! measured, so a re-run skips it.

use crate::backend::select::Runtime;
use crate::digest::sha256_hex16;
use crate::tensor::Precision;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The identity of one cell of the matrix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellKey {
    /// SHA-256 of the ONNX model file (its content, not its path).
    pub model_sha256: String,
    /// The precision rewrite.
    pub precision: Precision,
    /// Samples per inference.
    pub batch: usize,
    /// Sizes of the swept named axes (`seq` → 128); absent for a model without any, so the keys
    /// of such cells are what they were before sweeps existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dims: BTreeMap<String, i64>,
    /// The runtime.
    pub target: Runtime,
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
        sha256_hex16(&json)
    }

    /// The id of the key whatever GPU model measures it: how the machine that plans a cluster
    /// array (which may have no GPU) recognises the cells its nodes measured.
    pub(crate) fn site_free_id(&self) -> String {
        CellKey {
            gpu: String::new(),
            ..self.clone()
        }
        .id()
    }

    /// Where the cell sits along the size axes: its batch and named-axis sizes.
    pub(crate) fn point(&self) -> Point {
        Point {
            batch: self.batch,
            dims: self.dims.clone(),
        }
    }
}

/// A cell's sizes: the batch, then each swept named axis. Ordered by batch, then by the axes'
/// sizes, the order of a table's columns.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Point {
    /// Samples per inference.
    pub batch: usize,
    /// Named-axis sizes.
    pub dims: BTreeMap<String, i64>,
}

impl Point {
    /// `batch 8`, or `batch 8 seq 128` with a swept axis (a table's column header).
    pub fn label(&self) -> String {
        crate::jobs::run::point_label(self.batch, &self.dims)
    }

    /// `8`, or `8 seq 128` (a plot's category).
    pub(crate) fn short_label(&self) -> String {
        std::iter::once(self.batch.to_string())
            .chain(self.dims.iter().map(|(n, v)| format!("{n} {v}")))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// How people name a cell: `model/precision/bBATCH/target` (`resnet50/fp16/b32/trt`), with
/// each swept axis after the batch (`distilbert/fp16/b1/seq=128/trt`).
pub(crate) fn cell_label(model: &str, key: &CellKey) -> String {
    let dims: String = key.dims.iter().map(|(n, v)| format!("/{n}={v}")).collect();
    format!(
        "{model}/{}/b{}{dims}/{}",
        key.precision, key.batch, key.target
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CellKey {
        CellKey {
            model_sha256: "ab".repeat(32),
            precision: Precision::Fp16,
            batch: 4,
            dims: BTreeMap::new(),
            target: Runtime::TractCpu,
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
                target: Runtime::OrtCpu,
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
            CellKey {
                dims: [("seq".to_string(), 128)].into(),
                ..key()
            },
        ];
        for v in variants {
            assert_ne!(v.id(), base, "{v:?}");
        }
    }

    /// A key without swept axes serializes as keys did before sweeps, so the journals of
    /// earlier runs still resume.
    #[test]
    fn a_key_without_dims_keeps_its_old_form() {
        let json = serde_json::to_string(&key()).unwrap();
        assert!(!json.contains("dims"), "{json}");
        let back: CellKey = serde_json::from_str(&json).unwrap();
        assert_eq!(back, key());
    }

    #[test]
    fn labels_name_the_swept_axes_after_the_batch() {
        assert_eq!(cell_label("net", &key()), "net/fp16/b4/tract-cpu");
        let k = CellKey {
            dims: [("seq".to_string(), 128), ("img".to_string(), 64)].into(),
            ..key()
        };
        assert_eq!(
            cell_label("bert", &k),
            "bert/fp16/b4/img=64/seq=128/tract-cpu"
        );
        assert_eq!(k.point().label(), "batch 4 img 64 seq 128");
        assert_eq!(k.point().short_label(), "4 img 64 seq 128");
        let smaller = CellKey {
            dims: [("seq".to_string(), 64), ("img".to_string(), 64)].into(),
            ..key()
        };
        assert!(smaller.point() < k.point());
        assert!(k.point() < CellKey { batch: 8, ..key() }.point());
    }
}
