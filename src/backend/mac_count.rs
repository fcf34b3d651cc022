//! The shape of every tensor of an ONNX model at one sample, as tract infers it, and the MACs
//! per node counted from those shapes (`inspect`, the INT8 sensitivity table and its INT8
//! share).

use super::tract::parse;
use crate::onnx::external_shapes::external_weights_as_inputs;
use crate::onnx::macs::{count_macs, MacsCount, MacsUnknown};
use crate::onnx::shape::{fixed_batch, model_inputs, shaped, ShapeRequest};
use crate::onnx::OnnxModel;
use crate::tensor::{BatchAxisRequest, Dim, UnfixedAxis};
use anyhow::Result;
use std::collections::HashMap;
use tract_onnx::prelude::*;

/// Every tensor whose shape tract can make concrete, by its ONNX name, at the model's fixed
/// batch (or batch 1), with `request` applied first; also the batch used. External weights
/// over a few KiB are never read (their dims stand for them).
pub(crate) fn tensor_shapes(
    model: &OnnxModel,
    request: &ShapeRequest,
) -> Result<(HashMap<String, Vec<usize>>, usize)> {
    // The model's own fixed batch, or batch 1 fixed.
    let (mut model, _, batch) = shaped(
        model.clone(),
        request,
        &BatchAxisRequest::default(),
        |m, _| match fixed_batch(m) {
            Some(n) if n > 0 => (None, n),
            _ => (Some(1), 1),
        },
    )?;
    check_inputs_fixed(&model)?;
    // Shapes need the weights' dims, not their bytes: large external data stays on disk.
    external_weights_as_inputs(model.graph_mut());
    let typed = parse(&model)
        .map_err(|e| MacsUnknown::Inference(short_reason(&e)))?
        .model
        .into_typed()
        .map_err(|e| MacsUnknown::Inference(short_reason(&e)))?;
    let mut shapes = HashMap::new();
    for node in typed.nodes() {
        for (slot, output) in node.outputs.iter().enumerate() {
            let Some(dims) = output.fact.shape.as_concrete() else {
                continue;
            };
            let name = typed
                .outlet_label(OutletId::new(node.id, slot))
                .unwrap_or(&node.name);
            shapes.insert(name.to_string(), dims.to_vec());
        }
    }
    Ok((shapes, batch))
}

/// Refuses a model with an input axis left free (after the batch is fixed): every count
/// downstream of it would be unknown.
fn check_inputs_fixed(model: &OnnxModel) -> Result<(), MacsUnknown> {
    for info in model_inputs(model) {
        let Some(dims) = &info.dims else {
            return Err(MacsUnknown::Undeclared(info.name.clone()));
        };
        if let Some((axis, dim)) = dims
            .iter()
            .enumerate()
            .find(|(_, d)| !matches!(d, Dim::Fixed(_)))
        {
            return Err(MacsUnknown::Unfixed(UnfixedAxis {
                tensor: info.name.clone(),
                axis,
                dim: dim.clone(),
                dims: dims.clone(),
            }));
        }
    }
    Ok(())
}

/// The first line of the innermost cause of tract's error, cut to one short line.
fn short_reason(e: &anyhow::Error) -> String {
    const MOST: usize = 160;
    let root = e.root_cause().to_string();
    let line = root.lines().next().unwrap_or("").trim();
    match line.char_indices().nth(MOST) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// The MACs of `model` per sample (its shapes from [`tensor_shapes`]).
pub fn model_macs(model: &OnnxModel, request: &ShapeRequest) -> Result<MacsCount> {
    let (shapes, batch) = tensor_shapes(model, request)?;
    Ok(count_macs(model.graph(), &shapes, batch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_models::classifier;

    /// The test classifier by hand: a 3×3 conv, 3 → 8 channels, padding 1, on 16×16 keeps
    /// 8×16×16 outputs, each summing 3×3×3 products; the Gemm maps 512 features to 10 classes.
    #[test]
    fn macs_of_the_classifier_equal_a_hand_count() {
        for batch in [None, Some(4)] {
            let model = OnnxModel::from_proto(classifier(batch), "c.onnx");
            let m = model_macs(&model, &ShapeRequest::default()).unwrap();
            let conv = 8 * 16 * 16 * (3 * 3 * 3);
            let gemm = 10 * 512;
            assert_eq!(m.nodes.len(), 2, "{m:?}");
            assert_eq!(m.nodes[0].macs, conv);
            assert_eq!(m.nodes[1].macs, gemm);
            assert_eq!(m.total, conv + gemm);
            assert!(m.unknown.is_empty());
            let share = m.share([m.nodes[0].node]);
            assert!((share - conv as f64 / (conv + gemm) as f64).abs() < 1e-12);
        }
    }
}
