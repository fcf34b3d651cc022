//! Gemm rewritten as MatMul and Add, for the FP16 rewrite: tract cannot run a float16 Gemm,
//! and TensorRT fuses either form the same way.

use super::initializer::read_f32;
use crate::onnx::attributes::attribute;
use crate::onnx::dtype::data_type;
use crate::onnx::pb::tensor_proto::DataType;
use crate::onnx::pb::{GraphProto, NodeProto};
use anyhow::Result;
use rayon::prelude::*;
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
            let v = read_f32(weight)?;
            // One output row per task: a ResNet-50's 1000×2048 classifier took 10 ms to
            // transpose on one core, strided.
            let mut t = vec![0f32; v.len()];
            t.par_chunks_mut(rows.max(1))
                .enumerate()
                .for_each(|(c, column)| {
                    for (r, out) in column.iter_mut().enumerate() {
                        *out = v[r * cols + c];
                    }
                });
            let name = format!("{}_transposed", weight.name);
            if !g.initializer.iter().any(|i| i.name == name) {
                g.initializer.push(crate::onnx::graph_builder::tensor_f32(
                    &name,
                    &[cols as i64, rows as i64],
                    &t,
                ));
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
    let read: HashSet<String> = g.node.iter().flat_map(|n| n.input.clone()).collect();
    let inputs: HashSet<String> = g.input.iter().map(|v| v.name.clone()).collect();
    g.initializer
        .retain(|t| read.contains(&t.name) || inputs.contains(&t.name));
    Ok(())
}
