//! A small builder for ONNX graphs, for test models and for passes that add nodes.

use super::pb::attribute_proto::AttributeType;
use super::pb::tensor_proto::DataType;
use super::pb::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
};
use super::tensor_info::value_info;
use crate::tensor::Dim;

/// Opset the builder declares unless told otherwise.
pub(crate) const DEFAULT_OPSET: i64 = 17;

/// ONNX IR version written by the builder (IR 8 goes with opset 17).
pub(crate) const IR_VERSION: i64 = 8;

/// An integer-list attribute.
pub fn attr_ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Ints as i32,
        ints: values.to_vec(),
        ..Default::default()
    }
}

/// An integer attribute.
pub fn attr_int(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i: value,
        ..Default::default()
    }
}

/// A float attribute.
pub(crate) fn attr_float(name: &str, value: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Float as i32,
        f: value,
        ..Default::default()
    }
}

/// `Cast(input) -> output` to the element type `to`, named after its output.
pub(crate) fn cast_node(input: &str, output: &str, to: DataType) -> NodeProto {
    NodeProto {
        name: format!("{output}_Cast"),
        op_type: "Cast".into(),
        input: vec![input.to_string()],
        output: vec![output.to_string()],
        attribute: vec![attr_int("to", to as i64)],
        ..Default::default()
    }
}

/// A float32 tensor stored as raw little-endian data.
pub fn tensor_f32(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    assert_eq!(
        dims.iter().product::<i64>() as usize,
        data.len(),
        "tensor '{name}': dims and data disagree"
    );
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Float as i32,
        raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// An int64 tensor stored as raw little-endian data.
pub fn tensor_i64(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Int64 as i32,
        raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// Accumulates inputs, outputs, initializers and nodes, then produces a `ModelProto`.
#[derive(Default)]
pub struct GraphBuilder {
    graph: GraphProto,
}

impl GraphBuilder {
    /// An empty graph with the given name.
    pub fn new(name: &str) -> Self {
        GraphBuilder {
            graph: GraphProto {
                name: name.into(),
                ..Default::default()
            },
        }
    }

    /// Declares a graph input.
    pub fn input(&mut self, name: &str, elem_type: DataType, dims: &[Dim]) -> &mut Self {
        self.graph
            .input
            .push(value_info(name, elem_type as i32, dims));
        self
    }

    /// Declares a graph output.
    pub fn output(&mut self, name: &str, elem_type: DataType, dims: &[Dim]) -> &mut Self {
        self.graph
            .output
            .push(value_info(name, elem_type as i32, dims));
        self
    }

    /// Adds an initializer.
    pub fn initializer(&mut self, tensor: TensorProto) -> &mut Self {
        self.graph.initializer.push(tensor);
        self
    }

    /// Adds a node in the default domain; its name is `<op>_<index>`.
    pub fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<AttributeProto>,
    ) -> &mut Self {
        let name = format!("{}_{}", op.to_ascii_lowercase(), self.graph.node.len());
        self.graph.node.push(NodeProto {
            name,
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute: attrs,
            ..Default::default()
        });
        self
    }

    /// Finishes the model with the default opset and producer `trtkit`.
    pub fn build(&self) -> ModelProto {
        ModelProto {
            ir_version: IR_VERSION,
            producer_name: "trtkit".into(),
            producer_version: env!("CARGO_PKG_VERSION").into(),
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: DEFAULT_OPSET,
            }],
            graph: Some(self.graph.clone()),
            ..Default::default()
        }
    }
}
