//! What an integer input of a model is for, read from the graph, so generated inputs are valid:
//! token ids that index an embedding table (a `Gather` whose data is an initializer) lie in
//! `[0, rows)`; an attention mask (named so, or cast and used in arithmetic as a mask) is ones
//! followed by padding zeros; `token_type_ids`-like inputs are zeros.

use super::OnnxModel;
use crate::tensor::IntInput;
use std::collections::BTreeMap;

/// ONNX element types that are integers (int8 … uint64).
fn is_integer(code: i32) -> bool {
    matches!(code, 2..=7 | 12 | 13)
}

/// The names a tensor flows to through pass-through ops (Cast, Unsqueeze, Reshape, Squeeze,
/// Flatten, Identity), itself included.
fn aliases(model: &OnnxModel, name: &str) -> Vec<String> {
    let through = [
        "Cast",
        "Unsqueeze",
        "Reshape",
        "Squeeze",
        "Flatten",
        "Identity",
    ];
    let mut out = vec![name.to_string()];
    let mut i = 0;
    while i < out.len() {
        for n in &model.graph().node {
            if through.contains(&n.op_type.as_str()) && n.input.first() == Some(&out[i]) {
                for o in &n.output {
                    if !out.contains(o) {
                        out.push(o.clone());
                    }
                }
            }
        }
        i += 1;
    }
    out
}

/// The role of one integer input, if the graph or its name tells one.
fn role(model: &OnnxModel, name: &str) -> Option<IntInput> {
    let lower = name.to_ascii_lowercase();
    if lower.contains("token_type") || lower.contains("segment") {
        return Some(IntInput::Zeros);
    }
    if lower.contains("mask") {
        return Some(IntInput::Mask);
    }
    let names = aliases(model, name);
    let rows = |table: &str| {
        model
            .graph()
            .initializer
            .iter()
            .find(|t| t.name == table)
            .and_then(|t| t.dims.first().copied())
    };
    let casts = &names[1..];
    let mut indexes: Option<i64> = None;
    let mut masks = false;
    for n in &model.graph().node {
        let takes = |set: &[String], k: usize| n.input.get(k).is_some_and(|i| set.contains(i));
        match n.op_type.as_str() {
            "Gather" if takes(&names, 1) => {
                if let Some(r) = n.input.first().and_then(|t| rows(t)) {
                    indexes = Some(indexes.map_or(r, |m| m.min(r)));
                }
            }
            // A cast of it enters mask arithmetic: (1 - mask) * -1e4, or x * mask.
            "Sub" | "Mul" if takes(casts, 0) || takes(casts, 1) => masks = true,
            _ => {}
        }
    }
    match (indexes, masks) {
        (Some(rows), _) if rows > 0 => Some(IntInput::Range { low: 0, high: rows }),
        (None, true) => Some(IntInput::Mask),
        _ => None,
    }
}

/// The roles of every integer input of `model` whose role the graph or its name tells.
pub(crate) fn int_input_roles(model: &OnnxModel) -> BTreeMap<String, IntInput> {
    let initializers: Vec<&str> = model
        .graph()
        .initializer
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    let mut out = BTreeMap::new();
    for input in &model.graph().input {
        if initializers.contains(&input.name.as_str()) {
            continue;
        }
        let code = input
            .r#type
            .as_ref()
            .and_then(|t| match &t.value {
                Some(super::pb::type_proto::Value::TensorType(tt)) => Some(tt.elem_type),
                _ => None,
            })
            .unwrap_or(0);
        if !is_integer(code) {
            continue;
        }
        if let Some(r) = role(model, &input.name) {
            out.insert(input.name.clone(), r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::test_models::{token_classifier, TOKEN_VOCAB};

    fn roles_of(proto: crate::onnx::pb::ModelProto) -> BTreeMap<String, IntInput> {
        int_input_roles(&OnnxModel::from_proto(
            proto,
            std::path::Path::new("t.onnx"),
        ))
    }

    #[test]
    fn token_ids_index_the_embedding_and_the_mask_is_found() {
        let roles = roles_of(token_classifier());
        assert_eq!(
            roles["input_ids"],
            IntInput::Range {
                low: 0,
                high: TOKEN_VOCAB
            }
        );
        assert_eq!(roles["attention_mask"], IntInput::Mask);
    }

    #[test]
    fn a_mask_is_found_by_its_use_when_its_name_says_nothing() {
        let mut proto = token_classifier();
        let g = proto.graph.as_mut().unwrap();
        g.input[1].name = "m".into();
        g.input[0].name = "segment_ids".into();
        for n in &mut g.node {
            for i in &mut n.input {
                if i == "attention_mask" {
                    *i = "m".into();
                }
                if i == "input_ids" {
                    *i = "segment_ids".into();
                }
            }
        }
        let roles = roles_of(proto);
        assert_eq!(roles["m"], IntInput::Mask);
        assert_eq!(
            roles["segment_ids"],
            IntInput::Zeros,
            "the name wins for segment ids"
        );
        // Float inputs have no role.
        let roles = roles_of(crate::onnx::test_models::classifier(None));
        assert!(roles.is_empty());
    }
}
