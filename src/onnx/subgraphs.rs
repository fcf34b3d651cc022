//! Subgraphs: the branches of an `If`, the body of a `Loop` or a `Scan`. A subgraph may read any
//! value of the graphs around it by name, without listing it among the node's inputs; a pass
//! that drops, renames or retypes values must see those reads too.

use super::pb::{GraphProto, NodeProto};
use std::collections::HashSet;

/// The subgraphs `node` holds, in attribute order.
pub(crate) fn subgraphs(node: &NodeProto) -> impl Iterator<Item = &GraphProto> {
    node.attribute
        .iter()
        .flat_map(|a| a.g.iter().chain(&a.graphs))
}

/// [`subgraphs`], to rewrite them.
pub(crate) fn subgraphs_mut(node: &mut NodeProto) -> impl Iterator<Item = &mut GraphProto> {
    node.attribute
        .iter_mut()
        .flat_map(|a| a.g.iter_mut().chain(a.graphs.iter_mut()))
}

/// Whether `node` holds a subgraph.
pub(crate) fn holds_subgraph(node: &NodeProto) -> bool {
    subgraphs(node).next().is_some()
}

/// One read of an outside value by a subgraph.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OuterRead<'a> {
    /// The value read.
    pub name: &'a str,
    /// The node of the subgraph reading it and the input slot; `None` when a subgraph hands the
    /// value on as one of its outputs.
    pub reader: Option<(&'a NodeProto, usize)>,
}

/// Every read, by the subgraphs of `node` and those nested in them, of a value none of them
/// defines (as an input, an initializer or a node's output): the values they take from the
/// graphs around `node`.
pub(crate) fn outer_reads(node: &NodeProto) -> Vec<OuterRead<'_>> {
    let mut reads = vec![];
    for g in subgraphs(node) {
        reads_of(g, &HashSet::new(), &mut reads);
    }
    reads
}

/// The values `node`'s subgraphs take from outside them, each once.
pub(crate) fn outer_names(node: &NodeProto) -> HashSet<String> {
    outer_reads(node)
        .iter()
        .map(|r| r.name.to_string())
        .collect()
}

fn reads_of<'a>(g: &'a GraphProto, above: &HashSet<&'a str>, reads: &mut Vec<OuterRead<'a>>) {
    let mut local = above.clone();
    local.extend(g.input.iter().map(|v| v.name.as_str()));
    local.extend(g.initializer.iter().map(|t| t.name.as_str()));
    local.extend(
        g.node
            .iter()
            .flat_map(|n| n.output.iter().map(String::as_str)),
    );
    for node in &g.node {
        for (slot, name) in node.input.iter().enumerate() {
            if !name.is_empty() && !local.contains(name.as_str()) {
                reads.push(OuterRead {
                    name,
                    reader: Some((node, slot)),
                });
            }
        }
        for sub in subgraphs(node) {
            reads_of(sub, &local, reads);
        }
    }
    for out in &g.output {
        if !local.contains(out.name.as_str()) {
            reads.push(OuterRead {
                name: &out.name,
                reader: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::pb::{attribute_proto::AttributeType, AttributeProto, ValueInfoProto};

    fn node(op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
        NodeProto {
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn graph(nodes: Vec<NodeProto>, outputs: &[&str]) -> GraphProto {
        GraphProto {
            node: nodes,
            output: outputs
                .iter()
                .map(|n| ValueInfoProto {
                    name: n.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn holding(op: &str, branches: Vec<GraphProto>) -> NodeProto {
        let mut n = node(op, &["cond"], &["y"]);
        n.attribute = branches
            .into_iter()
            .enumerate()
            .map(|(i, g)| AttributeProto {
                name: format!("branch{i}"),
                r#type: AttributeType::Graph as i32,
                g: Some(g),
                ..Default::default()
            })
            .collect();
        n
    }

    #[test]
    fn reads_from_outside_are_found_through_nested_subgraphs_and_local_values_are_not() {
        let inner = graph(vec![node("Mul", &["t", "w2"], &["u"])], &["u"]);
        let then = graph(
            vec![
                node("Add", &["x", "w1"], &["t"]),
                holding("If", vec![inner]),
            ],
            &["y"],
        );
        let other = graph(vec![], &["x"]);
        let outer = holding("If", vec![then, other]);
        let mut names: Vec<String> = outer_names(&outer).into_iter().collect();
        names.sort();
        assert_eq!(names, ["cond", "w1", "w2", "x"]);
        let handed_on: Vec<&str> = outer_reads(&outer)
            .iter()
            .filter(|r| r.reader.is_none())
            .map(|r| r.name)
            .collect();
        assert_eq!(handed_on, ["x"]);
        assert!(holds_subgraph(&outer));
        assert!(!holds_subgraph(&node("Relu", &["x"], &["y"])));
    }
}
