//! A model's large external initializers as typed graph inputs: what shape inference needs
//! (dims and element type) without reading gigabytes of weights it never looks at.

use super::external::{external_ref, is_external};
use super::pb::GraphProto;
use super::tensor_info::value_info;
use crate::tensor::Dim;

/// External initializers up to this many bytes stay (a shape or an axes list that inference
/// reads as a constant is tiny); larger ones become inputs.
pub(crate) const KEEP_AT_MOST: u64 = 64 << 10;

/// Moves every external initializer of `graph` over [`KEEP_AT_MOST`] bytes (by its declared
/// length) to a graph input of the same name, element type and dims, so that whoever parses
/// the graph reads its size from the model and never opens its data. Returns how many moved.
pub(crate) fn external_weights_as_inputs(graph: &mut GraphProto) -> usize {
    let (moved, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut graph.initializer)
        .into_iter()
        .partition(|t| is_external(t) && external_ref(t).map_or(true, |r| r.length > KEEP_AT_MOST));
    graph.initializer = kept;
    for t in &moved {
        let dims: Vec<Dim> = t.dims.iter().map(|&d| Dim::Fixed(d.max(0))).collect();
        graph.input.retain(|i| i.name != t.name);
        graph.input.push(value_info(&t.name, t.data_type, &dims));
    }
    moved.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::pb::tensor_proto::DataLocation;
    use crate::onnx::pb::{StringStringEntryProto, TensorProto};

    fn external(name: &str, dims: Vec<i64>) -> TensorProto {
        TensorProto {
            name: name.into(),
            dims,
            data_type: 1,
            data_location: Some(DataLocation::External as i32),
            external_data: vec![StringStringEntryProto {
                key: "location".into(),
                value: "w.bin".into(),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn large_external_weights_become_inputs_small_ones_stay() {
        let inline = TensorProto {
            name: "inline".into(),
            dims: vec![1 << 20],
            data_type: 1,
            ..Default::default()
        };
        let mut graph = GraphProto {
            initializer: vec![
                external("big", vec![1024, 1024]),
                external("shape", vec![4]),
                inline,
            ],
            ..Default::default()
        };
        assert_eq!(external_weights_as_inputs(&mut graph), 1);
        let names: Vec<_> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["shape", "inline"]);
        assert_eq!(graph.input.len(), 1);
        assert_eq!(
            graph.input[0],
            value_info("big", 1, &[Dim::Fixed(1024), Dim::Fixed(1024)])
        );
    }
}
