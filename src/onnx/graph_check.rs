//! The structure every ONNX graph must have, checked when a model is read, before any backend,
//! rewrite or TensorRT sees it: each graph output listed once, each tensor made by one producer
//! (a graph input, an initializer or one node output), and no cycle among the nodes. Each
//! refusal names the tensor or the nodes at fault.

use super::pb::{GraphProto, NodeProto};
use anyhow::{bail, Result};
use std::collections::{HashMap, HashSet};

/// Checks the top level of `graph`: unique output names, one producer per tensor, no cycle.
pub(crate) fn check_graph_structure(graph: &GraphProto) -> Result<()> {
    check_unique_outputs(graph)?;
    let producers = check_single_producers(graph)?;
    check_acyclic(&graph.node, &producers)
}

/// Each graph output is listed once.
fn check_unique_outputs(graph: &GraphProto) -> Result<()> {
    let mut seen = HashSet::new();
    for output in &graph.output {
        if !seen.insert(output.name.as_str()) {
            bail!(
                "not a valid ONNX model: graph output '{}' is listed twice",
                output.name
            );
        }
    }
    Ok(())
}

/// Each tensor has one producer: returns the node that makes each node output. (An
/// initializer listed among the graph inputs too, as older exporters write them, is one.)
fn check_single_producers(graph: &GraphProto) -> Result<HashMap<&str, usize>> {
    let outer: HashSet<&str> = graph
        .input
        .iter()
        .map(|v| v.name.as_str())
        .chain(graph.initializer.iter().map(|t| t.name.as_str()))
        .collect();
    let mut producers: HashMap<&str, usize> = HashMap::new();
    for (i, node) in graph.node.iter().enumerate() {
        for out in node.output.iter().filter(|o| !o.is_empty()) {
            if outer.contains(out.as_str()) {
                bail!(
                    "not a valid ONNX model: node {} writes '{out}', which is a graph input or initializer",
                    describe(node)
                );
            }
            if let Some(first) = producers.insert(out, i) {
                bail!(
                    "not a valid ONNX model: tensor '{out}' is written by two nodes, {} and {}",
                    describe(&graph.node[first]),
                    describe(node)
                );
            }
        }
    }
    Ok(producers)
}

/// No node depends on itself through other nodes (Kahn's order; where it stalls, the cycle is
/// walked back from a node it left and named).
fn check_acyclic(nodes: &[NodeProto], producers: &HashMap<&str, usize>) -> Result<()> {
    let inputs_of = |i: usize| -> Vec<usize> {
        nodes[i]
            .input
            .iter()
            .filter_map(|t| producers.get(t.as_str()).copied())
            .collect()
    };
    let mut waiting: Vec<usize> = (0..nodes.len()).map(|i| inputs_of(i).len()).collect();
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for i in 0..nodes.len() {
        for p in inputs_of(i) {
            readers[p].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..nodes.len()).filter(|&i| waiting[i] == 0).collect();
    let mut done = 0;
    while let Some(i) = ready.pop() {
        done += 1;
        for &r in &readers[i] {
            waiting[r] -= 1;
            if waiting[r] == 0 {
                ready.push(r);
            }
        }
    }
    if done == nodes.len() {
        return Ok(());
    }
    // Every node left waits on another node left: walking back must come round to a node seen.
    let Some(start) = (0..nodes.len()).find(|&i| waiting[i] > 0) else {
        return Ok(());
    };
    let mut path = vec![start];
    let mut at = start;
    loop {
        let Some(prev) = inputs_of(at).into_iter().find(|&p| waiting[p] > 0) else {
            bail!(
                "not a valid ONNX model: the graph has a cycle at node {}",
                describe(&nodes[start])
            );
        };
        if let Some(pos) = path.iter().position(|&n| n == prev) {
            let mut cycle: Vec<usize> = path[pos..].to_vec();
            cycle.reverse();
            cycle.push(cycle[0]);
            let names: Vec<String> = cycle.iter().map(|&n| describe(&nodes[n])).collect();
            bail!(
                "not a valid ONNX model: the graph has a cycle: {}",
                names.join(" → ")
            );
        }
        path.push(prev);
        at = prev;
    }
}

/// A node as messages name it: `'name' (Op)`, or its position where it has no name.
fn describe(node: &NodeProto) -> String {
    if node.name.is_empty() {
        format!(
            "({}, unnamed, writing '{}')",
            node.op_type,
            node.output.join("', '")
        )
    } else {
        format!("'{}' ({})", node.name, node.op_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::pb::ValueInfoProto;

    fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
        NodeProto {
            name: name.into(),
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn graph(nodes: Vec<NodeProto>, outputs: &[&str]) -> GraphProto {
        let value = |n: &str| ValueInfoProto {
            name: n.into(),
            ..Default::default()
        };
        GraphProto {
            node: nodes,
            input: vec![value("x")],
            output: outputs.iter().map(|n| value(n)).collect(),
            ..Default::default()
        }
    }

    fn err(g: &GraphProto) -> String {
        format!("{:#}", check_graph_structure(g).unwrap_err())
    }

    #[test]
    fn a_cycle_is_named_in_dataflow_order() {
        let g = graph(
            vec![
                node("head", "Relu", &["x"], &["h"]),
                node("add", "Add", &["h", "b"], &["a"]),
                node("r1", "Relu", &["a"], &["b"]),
                node("tail", "Relu", &["b"], &["y"]),
            ],
            &["y"],
        );
        let e = err(&g);
        assert!(
            e.contains("'add' (Add) → 'r1' (Relu) → 'add' (Add)")
                || e.contains("'r1' (Relu) → 'add' (Add) → 'r1' (Relu)"),
            "{e}"
        );
        let self_loop = graph(vec![node("me", "Add", &["x", "m"], &["m"])], &["m"]);
        assert!(err(&self_loop).contains("'me' (Add) → 'me' (Add)"));
    }

    #[test]
    fn duplicate_outputs_and_producers_are_named() {
        let ok = vec![node("r", "Relu", &["x"], &["y"])];
        assert!(check_graph_structure(&graph(ok.clone(), &["y"])).is_ok());
        assert!(err(&graph(ok, &["y", "y"])).contains("graph output 'y' is listed twice"));
        let two = vec![
            node("r", "Relu", &["x"], &["y"]),
            node("s", "Sigmoid", &["x"], &["y"]),
        ];
        let e = err(&graph(two, &["y"]));
        assert!(
            e.contains("tensor 'y' is written by two nodes, 'r' (Relu) and 's' (Sigmoid)"),
            "{e}"
        );
        let over_input = vec![node("", "Relu", &["x"], &["x"])];
        assert!(err(&graph(over_input, &["x"])).contains("writing 'x'"));
    }
}
