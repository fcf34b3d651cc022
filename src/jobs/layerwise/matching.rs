//! Which tensor of the graph under test holds the value of each reference tensor, through the
//! renames of trtkit's rewrites, and how the marked tensors are split into groups that fit in
//! memory.

use crate::onnx::rewrite::mark::ProducedTensor;
use crate::onnx::OnnxModel;
use std::collections::HashMap;

/// The tensor of `a` that holds the value of the reference tensor `name`.
///
/// The rule, from what the rewrites do to names:
/// - The INT8 rewrite keeps the float tensor `X` a node makes and adds
///   `QuantizeLinear(X) → X_quantized → DequantizeLinear → X_dequantized`; every reader of `X`
///   reads `X_dequantized` instead. An INT8 engine holds `X` as those int8 values, so `X` is
///   matched with `X_dequantized` where `a` has that pair on `X`.
/// - The FP16 rewrite keeps every name, in float16 (float32 for the ops it keeps); the Casts it
///   adds write `X_fp16` / `X_fp32`, `X` in the other type, which are not matched. A graph output
///   is made under `X_fp16` and cast back to `X`, which holds its value. So `X` is matched with
///   `X`.
/// - Any other graph: the same name. `None` when `a` makes no tensor of that name.
pub(crate) fn matched_name(
    name: &str,
    producers: &HashMap<&str, (&str, Option<&str>)>,
) -> Option<String> {
    let dq = format!("{name}_dequantized");
    if let Some(("DequantizeLinear", Some(q))) = producers.get(dq.as_str()).copied() {
        if let Some(("QuantizeLinear", Some(x))) = producers.get(q).copied() {
            if x == name {
                return Some(dq);
            }
        }
    }
    producers.contains_key(name).then(|| name.to_string())
}

/// Every tensor `model`'s nodes make: its producer's op and first input.
pub(crate) fn producers(model: &OnnxModel) -> HashMap<&str, (&str, Option<&str>)> {
    let mut map = HashMap::new();
    for node in &model.graph().node {
        let first = node.input.first().map(String::as_str);
        for o in node.output.iter().filter(|o| !o.is_empty()) {
            map.insert(o.as_str(), (node.op_type.as_str(), first));
        }
    }
    map
}

/// The reference tensors `a` has a match for, with the name in `a`, and the names of those it
/// has none for.
pub(crate) fn match_tensors(
    reference: Vec<ProducedTensor>,
    a: &OnnxModel,
) -> (Vec<(ProducedTensor, String)>, Vec<String>) {
    let producers = producers(a);
    let mut matched = vec![];
    let mut missing = vec![];
    for t in reference {
        match matched_name(&t.name, &producers) {
            Some(m) => matched.push((t, m)),
            None => missing.push(t.name),
        }
    }
    (matched, missing)
}

/// Splits tensors of `bytes` each (in order) into consecutive groups of at most `budget` bytes;
/// a tensor larger than the budget alone is a group of its own.
pub(crate) fn groups(bytes: &[u64], budget: u64) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = vec![];
    let mut held = 0u64;
    for (i, &b) in bytes.iter().enumerate() {
        match out.last_mut() {
            Some(g) if held.saturating_add(b) <= budget => {
                g.push(i);
                held += b;
            }
            _ => {
                out.push(vec![i]);
                held = b;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::rewrite::mark::float_tensors;
    use crate::onnx::rewrite::pass::Pass;
    use crate::onnx::test_models;

    #[test]
    fn fp16_keeps_names_and_a_graph_output_holds_its_value() {
        let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let half = crate::onnx::rewrite::fp16::Fp16(Default::default())
            .run(m.clone())
            .unwrap()
            .0;
        let (matched, missing) = match_tensors(float_tensors(&m), &half);
        assert!(missing.is_empty(), "{missing:?}");
        assert!(matched.iter().all(|(t, n)| &t.name == n));
    }

    #[test]
    fn a_quantized_tensor_is_matched_with_its_dequantized_value() {
        let m = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        let mut q = m.clone();
        let g = q.graph_mut();
        let at = g.node.iter().position(|n| n.output[0] == "flat").unwrap();
        let reader = g.node.iter().position(|n| n.input[0] == "flat").unwrap();
        g.node[reader].input[0] = "flat_dequantized".into();
        let mk = |op: &str, i: &str, o: &str| crate::onnx::pb::NodeProto {
            op_type: op.into(),
            input: vec![i.into(), "s".into()],
            output: vec![o.into()],
            ..Default::default()
        };
        g.node
            .insert(at + 1, mk("QuantizeLinear", "flat", "flat_quantized"));
        g.node.insert(
            at + 2,
            mk("DequantizeLinear", "flat_quantized", "flat_dequantized"),
        );
        let (matched, _) = match_tensors(float_tensors(&m), &q);
        let flat = matched.iter().find(|(t, _)| t.name == "flat").unwrap();
        assert_eq!(flat.1, "flat_dequantized");
        let p = producers(&q);
        assert_eq!(matched_name("nope", &p), None);
    }

    #[test]
    fn groups_fill_up_to_the_budget() {
        assert_eq!(
            groups(&[4, 4, 4, 10, 1], 8),
            vec![vec![0, 1], vec![2], vec![3], vec![4]]
        );
        assert_eq!(groups(&[1, 2, 3], u64::MAX), vec![vec![0, 1, 2]]);
        assert!(groups(&[], 1).is_empty());
    }
}
