//! Names for the tensors a rewrite adds. ONNX wants every value named once in the whole model,
//! subgraphs included (single static assignment), so a new name is checked against all of them.

use crate::onnx::pb::GraphProto;
use crate::onnx::subgraphs::subgraphs;
use std::collections::HashSet;

/// The value names a model uses, and those handed out since.
pub(super) struct FreshNames(HashSet<String>);

impl FreshNames {
    /// The names `g` and its subgraphs use.
    pub(super) fn of(g: &GraphProto) -> FreshNames {
        let mut used: HashSet<String> = HashSet::new();
        FreshNames::add(g, &mut used);
        FreshNames(used)
    }

    fn add(g: &GraphProto, used: &mut HashSet<String>) {
        used.extend(g.input.iter().map(|v| v.name.clone()));
        used.extend(g.output.iter().map(|v| v.name.clone()));
        used.extend(g.initializer.iter().map(|t| t.name.clone()));
        for n in &g.node {
            used.extend(n.input.iter().cloned());
            used.extend(n.output.iter().cloned());
            subgraphs(n).for_each(|sub| FreshNames::add(sub, used));
        }
    }

    /// `base`, or `base` with a number after it, whichever is free; taken from now on.
    pub(super) fn fresh(&mut self, base: String) -> String {
        let mut name = base.clone();
        let mut k = 1;
        while self.0.contains(&name) {
            name = format!("{base}.{k}");
            k += 1;
        }
        self.0.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::pb::{AttributeProto, NodeProto};

    #[test]
    fn a_name_a_subgraph_uses_is_not_handed_out_and_none_twice() {
        let inner = GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into()],
                output: vec!["x_fp16".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let outer = GraphProto {
            node: vec![NodeProto {
                op_type: "If".into(),
                attribute: vec![AttributeProto {
                    name: "then_branch".into(),
                    g: Some(inner),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut names = FreshNames::of(&outer);
        assert_eq!(names.fresh("x_fp16".into()), "x_fp16.1");
        assert_eq!(names.fresh("x_fp16".into()), "x_fp16.2");
        assert_eq!(names.fresh("y".into()), "y");
    }
}
