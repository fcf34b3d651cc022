//! A read-only view of a graph for pattern matching: who makes each tensor, who reads it, and
//! the values of the small constants (scales, shapes, axes) a pattern needs to read.

use crate::onnx::attributes::{attribute, int_attr};
use crate::onnx::pb::{GraphProto, NodeProto, TensorProto};
use crate::onnx::subgraphs::outer_names;
use crate::onnx::tensor_values::tensor_values;
use crate::tensor::TensorData;
use std::collections::{HashMap, HashSet};

/// The producers and readers of every tensor of one graph.
pub(super) struct GraphView<'g> {
    /// The graph viewed.
    pub graph: &'g GraphProto,
    producer: HashMap<&'g str, usize>,
    readers: HashMap<&'g str, Vec<usize>>,
    /// Tensors read where no node input lists them: graph outputs and names subgraphs read.
    pinned: HashSet<String>,
    initializers: HashMap<&'g str, &'g TensorProto>,
}

impl<'g> GraphView<'g> {
    /// The view of `graph`.
    pub fn of(graph: &'g GraphProto) -> Self {
        let mut producer = HashMap::new();
        let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut pinned: HashSet<String> = graph.output.iter().map(|o| o.name.clone()).collect();
        for (i, node) in graph.node.iter().enumerate() {
            for out in node.output.iter().filter(|o| !o.is_empty()) {
                producer.insert(out.as_str(), i);
            }
            for input in node.input.iter().filter(|o| !o.is_empty()) {
                readers.entry(input.as_str()).or_default().push(i);
            }
            pinned.extend(outer_names(node));
        }
        let initializers = graph
            .initializer
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        GraphView {
            graph,
            producer,
            readers,
            pinned,
            initializers,
        }
    }

    /// The node that makes `tensor`, with its index.
    pub(crate) fn producer(&self, tensor: &str) -> Option<(usize, &'g NodeProto)> {
        let &i = self.producer.get(tensor)?;
        Some((i, &self.graph.node[i]))
    }

    /// The node that makes `tensor`, if it is an `op` node.
    pub(crate) fn made_by(&self, tensor: &str, op: &str) -> Option<(usize, &'g NodeProto)> {
        self.producer(tensor).filter(|(_, n)| n.op_type == op)
    }

    /// The indices of the nodes that read `tensor` as an input.
    pub fn readers(&self, tensor: &str) -> &[usize] {
        self.readers.get(tensor).map_or(&[], Vec::as_slice)
    }

    /// Whether `tensor` is read only by the nodes in `within` (and is no graph output, and no
    /// subgraph reads it).
    pub(crate) fn read_only_within(&self, tensor: &str, within: &HashSet<usize>) -> bool {
        !self.pinned.contains(tensor) && self.readers(tensor).iter().all(|r| within.contains(r))
    }

    /// Whether `tensor` is read anywhere but as an input of a node (a graph output, or a name a
    /// subgraph reads).
    pub fn pinned(&self, tensor: &str) -> bool {
        self.pinned.contains(tensor)
    }

    /// The initializer named `tensor`, or the one an `Identity` chain passes on as `tensor`
    /// (TorchScript exports share equal weights that way: every LayerNorm of a freshly made
    /// model reads one tensor of ones).
    pub fn initializer(&self, tensor: &str) -> Option<&'g TensorProto> {
        let mut t = tensor;
        for _ in 0..8 {
            if let Some(init) = self.initializers.get(t) {
                return Some(init);
            }
            t = &self.made_by(t, "Identity")?.1.input[0];
        }
        None
    }

    /// The float initializer behind a weight input `tensor`: [`Self::initializer`], or one a
    /// `Cast` passes on (the FP16 rewrite feeds a float32 LayerNorm its float16 weights so).
    pub fn weight(&self, tensor: &str) -> Option<&'g TensorProto> {
        self.initializer(tensor).or_else(|| {
            let (_, cast) = self.made_by(tensor, "Cast")?;
            self.initializer(&cast.input[0])
        })
    }

    /// The constant tensor behind `tensor`: an initializer, or a `Constant` node's `value`.
    pub fn constant(&self, tensor: &str) -> Option<&'g TensorProto> {
        if let Some(t) = self.initializer(tensor) {
            return Some(t);
        }
        let (_, node) = self.made_by(tensor, "Constant")?;
        attribute(node, "value").and_then(|a| a.t.as_ref())
    }

    /// The one value of a constant float tensor with one element (float32, float16 or float64).
    pub fn scalar(&self, tensor: &str) -> Option<f32> {
        match floats(self.constant(tensor)?)?.as_slice() {
            [v] => Some(*v),
            _ => None,
        }
    }

    /// The values of a constant integer tensor (int64 or int32), as a shape or axes list.
    pub fn ints(&self, tensor: &str) -> Option<Vec<i64>> {
        ints(self.constant(tensor)?)
    }

    /// The values of a 1-D shape tensor where they are known: a constant, or a `Concat` of
    /// constants and computed pieces (each computed piece of one element is `None`).
    pub(crate) fn shape_values(&self, tensor: &str) -> Option<Vec<Option<i64>>> {
        if let Some(v) = self.ints(tensor) {
            return Some(v.into_iter().map(Some).collect());
        }
        let (_, concat) = self.made_by(tensor, "Concat")?;
        let mut values = Vec::new();
        for piece in &concat.input {
            match self.ints(piece) {
                Some(v) => values.extend(v.into_iter().map(Some)),
                None => values.extend(std::iter::repeat_n(None, self.computed_len(piece)?)),
            }
        }
        Some(values)
    }

    /// How many values a computed piece of a shape holds where that is plain: one for an
    /// `Unsqueeze` of a dimension read at run time, `end − start` for a `Shape` with both.
    fn computed_len(&self, piece: &str) -> Option<usize> {
        let (_, node) = self.producer(piece)?;
        match node.op_type.as_str() {
            "Unsqueeze" => Some(1),
            "Shape" => {
                let (start, end) = (int_attr(node, "start")?, int_attr(node, "end")?);
                // A shape has a handful of axes; a longer slice is no Reshape target's piece.
                (start >= 0 && end > start && end - start <= 8).then(|| (end - start) as usize)
            }
            _ => None,
        }
    }
}

/// The float values of a float tensor (float32, float16 or float64), raw or typed.
pub(super) fn floats(t: &TensorProto) -> Option<Vec<f32>> {
    match tensor_values(t, &t.name).ok()? {
        v @ (TensorData::F32(_) | TensorData::F16(_) | TensorData::F64(_)) => {
            Some(v.as_f32().into_owned())
        }
        _ => None,
    }
}

/// The values of an integer tensor (int64 or int32), raw or typed.
pub(super) fn ints(t: &TensorProto) -> Option<Vec<i64>> {
    match tensor_values(t, &t.name).ok()? {
        TensorData::I64(v) => Some(v),
        TensorData::I32(v) => Some(v.into_iter().map(i64::from).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::graph_builder::{tensor_f32, tensor_i64, GraphBuilder};
    use crate::onnx::pb::attribute_proto::AttributeType;
    use crate::onnx::pb::AttributeProto;

    fn constant_node(name: &str, t: TensorProto) -> NodeProto {
        NodeProto {
            op_type: "Constant".into(),
            output: vec![name.into()],
            attribute: vec![AttributeProto {
                name: "value".into(),
                r#type: AttributeType::Tensor as i32,
                t: Some(t),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn constants_read_from_initializers_and_constant_nodes_and_concats() {
        let mut b = GraphBuilder::new("g");
        b.initializer(tensor_f32("s", &[], &[8.0]))
            .initializer(tensor_i64("heads", &[2], &[4, 16]));
        let mut g = b.build().graph.unwrap();
        g.node
            .push(constant_node("c", tensor_f32("c", &[1], &[0.5])));
        g.node.push(NodeProto {
            op_type: "Unsqueeze".into(),
            input: vec!["n".into()],
            output: vec!["n1".into()],
            ..Default::default()
        });
        g.node.push(NodeProto {
            op_type: "Concat".into(),
            input: vec!["n1".into(), "heads".into()],
            output: vec!["shape".into()],
            ..Default::default()
        });
        let v = GraphView::of(&g);
        assert_eq!(v.scalar("s"), Some(8.0));
        assert_eq!(v.scalar("c"), Some(0.5));
        assert_eq!(v.scalar("heads"), None);
        assert_eq!(v.shape_values("shape"), Some(vec![None, Some(4), Some(16)]));
        assert_eq!(v.readers("n1"), &[2]);
        assert!(v.read_only_within("n1", &HashSet::from([2])));
        assert!(!v.read_only_within("n1", &HashSet::from([1])));
    }
}
