//! Gemm rewritten as MatMul and Add, for the FP16 rewrite: tract cannot run a float16 Gemm,
//! and TensorRT fuses either form the same way.

use super::initializer::read_f32;
use crate::onnx::attributes::attribute;
use crate::onnx::dtype::data_type;
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{GraphProto, NodeProto, TensorProto};
use crate::onnx::subgraphs::outer_names;
use anyhow::{bail, Result};
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// Replaces `Gemm(A, B, C)` with plain `alpha = beta = 1`, no transA and a float32 initializer
/// `B` by `MatMul(A, Bᵀ or B)` + `Add(C)`: the same computation, which TensorRT fuses the same
/// way, and which tract runs in float16 (its Gemm expansion yields float32 from float16
/// inputs: "expected F16 got F32"). Other Gemms are left as they are.
pub(super) fn gemm_to_matmul(g: &mut GraphProto) -> Result<()> {
    let inits: HashMap<String, usize> = g
        .initializer
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    let old = std::mem::take(&mut g.node);
    let mut nodes = Vec::with_capacity(old.len());
    for node in old {
        let plain = node.op_type == "Gemm"
            && attribute(&node, "transA").is_none_or(|a| a.i == 0)
            && attribute(&node, "alpha").is_none_or(|a| a.f == 1.0)
            && attribute(&node, "beta").is_none_or(|a| a.f == 1.0);
        let b = node.input.get(1).and_then(|n| inits.get(n)).copied();
        let (true, Some(bi)) = (plain, b) else {
            nodes.push(node);
            continue;
        };
        let weight = &g.initializer[bi];
        if data_type(weight.data_type) != Some(DataType::Float) || weight.dims.len() != 2 {
            nodes.push(node);
            continue;
        }
        let trans_b = attribute(&node, "transB").is_some_and(|a| a.i != 0);
        let b_name = if trans_b {
            let (rows, cols) = (weight.dims[0] as usize, weight.dims[1] as usize);
            let name = format!("{}_transposed", weight.name);
            if !g.initializer.iter().any(|i| i.name == name) {
                let transposed = TensorProto {
                    name: name.clone(),
                    dims: vec![cols as i64, rows as i64],
                    data_type: DataType::Float as i32,
                    raw_data: transpose_f32_bytes(&le_bytes(weight)?, rows, cols),
                    ..Default::default()
                };
                g.initializer.push(transposed);
            }
            name
        } else {
            weight.name.clone()
        };
        let out = node.output[0].clone();
        let has_c = node.input.get(2).is_some_and(|c| !c.is_empty());
        let mm_out = if has_c {
            format!("{out}_matmul")
        } else {
            out.clone()
        };
        nodes.push(NodeProto {
            name: format!("{}_matmul", node.name),
            op_type: "MatMul".into(),
            input: vec![node.input[0].clone(), b_name],
            output: vec![mm_out.clone()],
            ..Default::default()
        });
        if has_c {
            nodes.push(NodeProto {
                name: format!("{}_bias", node.name),
                op_type: "Add".into(),
                input: vec![mm_out, node.input[2].clone()],
                output: vec![out],
                ..Default::default()
            });
        }
    }
    g.node = nodes;
    // A weight a subgraph reads from here (an If branch's, a Loop body's) stays too.
    let read: HashSet<String> = g
        .node
        .iter()
        .flat_map(|n| n.input.iter().cloned().chain(outer_names(n)))
        .collect();
    let inputs: HashSet<String> = g.input.iter().map(|v| v.name.clone()).collect();
    g.initializer
        .retain(|t| read.contains(&t.name) || inputs.contains(&t.name));
    Ok(())
}

/// A float32 initializer's values as little-endian bytes: its raw data as it is, or its
/// `float_data` encoded; an error when their count does not match its dims.
fn le_bytes(weight: &TensorProto) -> Result<Cow<'_, [u8]>> {
    let count: i64 = weight.dims.iter().product();
    if weight.raw_data.len() == count as usize * 4 {
        return Ok(Cow::Borrowed(&weight.raw_data));
    }
    let values = read_f32(weight)?;
    if values.len() as i64 != count {
        bail!(
            "initializer '{}' holds {} values for dims {:?}",
            weight.name,
            values.len(),
            weight.dims
        );
    }
    Ok(Cow::Owned(
        values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    ))
}

/// Output rows (input columns) per task: an input cache line of 16 values is read once.
const TRANSPOSE_BLOCK: usize = 16;

/// The `cols × rows` transpose of the row-major `rows × cols` float32 matrix `src` (4 bytes a
/// value), in tasks of [`TRANSPOSE_BLOCK`] output rows: a ResNet-50's 1000×2048 classifier
/// took 28 ms on two cores when each task gathered one strided column.
fn transpose_f32_bytes(src: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    let mut out = vec![0u8; src.len()];
    if rows == 0 || cols == 0 {
        return out;
    }
    out.par_chunks_mut(rows * 4 * TRANSPOSE_BLOCK)
        .enumerate()
        .for_each(|(block, dst)| {
            let first = block * TRANSPOSE_BLOCK;
            let width = dst.len() / (rows * 4);
            for r in 0..rows {
                let start = (r * cols + first) * 4;
                for (k, value) in src[start..start + width * 4].chunks_exact(4).enumerate() {
                    let at = (k * rows + r) * 4;
                    dst[at..at + 4].copy_from_slice(value);
                }
            }
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn weights_that_do_not_fill_their_dims_are_an_error_not_a_panic() {
        let mut w = crate::onnx::graph_builder::tensor_f32("w", &[2, 3], &[1.0; 6]);
        assert_eq!(le_bytes(&w).unwrap().len(), 24);
        w.raw_data.truncate(16);
        let e = le_bytes(&w).unwrap_err().to_string();
        assert!(e.contains("'w' holds 4 values for dims [2, 3]"), "{e}");
    }

    proptest! {
        #[test]
        fn the_blocked_transpose_is_the_plain_one(rows in 0usize..40, cols in 0usize..70) {
            let values: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.5 - 3.0).collect();
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let plain: Vec<u8> = (0..cols)
                .flat_map(|c| (0..rows).map(move |r| (r, c)))
                .flat_map(|(r, c)| values[r * cols + c].to_le_bytes())
                .collect();
            prop_assert_eq!(transpose_f32_bytes(&bytes, rows, cols), plain);
        }
    }
}
