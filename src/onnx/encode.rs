//! Encoding a model to protobuf bytes with its initializers written on every core.
//!
//! prost encodes a message on one thread; for a model whose weights are tens of MB that is a
//! single-threaded copy on the path to TensorRT. Here the model is encoded without its
//! initializers (a "shell"), the final size is worked out, and each initializer is encoded in
//! parallel into its own slice of one buffer. prost writes the fields of a message in tag order,
//! so the initializers (field 5 of `GraphProto`) go after the fields with lower tags and before
//! the rest: the bytes are exactly prost's (the tests compare them).

use super::pb::{GraphProto, ModelProto, TensorProto};
use prost::encoding::{decode_varint, encode_varint, encoded_len_varint, message, WireType};
use prost::Message;
use rayon::prelude::*;

/// `ModelProto.graph`.
const GRAPH_FIELD: u32 = 7;
/// `GraphProto.initializer`.
const INITIALIZER_FIELD: u32 = 5;
/// Below this many bytes of initializers, prost's own encoder is as fast.
const PARALLEL_FROM_BYTES: usize = 4 << 20;

/// The protobuf bytes of `model`, identical to prost's `encode_to_vec`; large models have their
/// initializers encoded in parallel.
pub(crate) fn encode_model(model: &ModelProto) -> Vec<u8> {
    let Some(graph) = &model.graph else {
        return model.encode_to_vec();
    };
    let weights: usize = graph.initializer.iter().map(Message::encoded_len).sum();
    if weights < PARALLEL_FROM_BYTES {
        return model.encode_to_vec();
    }
    encode_in_parallel(model, graph)
}

/// [`encode_model`]'s parallel path, whatever the model's size.
fn encode_in_parallel(model: &ModelProto, graph: &GraphProto) -> Vec<u8> {
    let model_shell = model_without_graph(model).encode_to_vec();
    let graph_shell = graph_without_initializers(graph).encode_to_vec();
    let (model_head, model_tail) = model_shell.split_at(fields_below(&model_shell, GRAPH_FIELD));
    let (graph_head, graph_tail) =
        graph_shell.split_at(fields_below(&graph_shell, INITIALIZER_FIELD));
    let entry_lens: Vec<usize> = graph
        .initializer
        .iter()
        .map(|t| field_len(INITIALIZER_FIELD, t.encoded_len()))
        .collect();
    let graph_len = graph_shell.len() + entry_lens.iter().sum::<usize>();
    let total = model_shell.len() + field_len(GRAPH_FIELD, graph_len);

    let mut out = vec![0u8; total];
    let mut rest: &mut [u8] = &mut out;
    rest.copy_from_slice_prefix(model_head);
    prost::encoding::encode_key(GRAPH_FIELD, WireType::LengthDelimited, &mut rest);
    encode_varint(graph_len as u64, &mut rest);
    rest.copy_from_slice_prefix(graph_head);
    let mut slots: Vec<&mut [u8]> = Vec::with_capacity(entry_lens.len());
    for &len in &entry_lens {
        let (slot, after) = std::mem::take(&mut rest).split_at_mut(len);
        slots.push(slot);
        rest = after;
    }
    slots
        .into_par_iter()
        .zip(graph.initializer.par_iter())
        .for_each(|(mut slot, tensor)| {
            message::encode(INITIALIZER_FIELD, tensor, &mut slot);
            debug_assert!(slot.is_empty(), "an initializer filled its slot exactly");
        });
    rest.copy_from_slice_prefix(graph_tail);
    rest.copy_from_slice_prefix(model_tail);
    debug_assert!(rest.is_empty(), "the parts add up to the computed size");
    out
}

/// Copying a part into the front of a buffer and moving past it.
trait WritePrefix {
    /// Copies `part` to the front and leaves `self` as what follows it.
    fn copy_from_slice_prefix(&mut self, part: &[u8]);
}

impl WritePrefix for &mut [u8] {
    fn copy_from_slice_prefix(&mut self, part: &[u8]) {
        let (front, after) = std::mem::take(self).split_at_mut(part.len());
        front.copy_from_slice(part);
        *self = after;
    }
}

/// Bytes of a length-delimited field with a one-byte key holding `len` bytes.
fn field_len(tag: u32, len: usize) -> usize {
    prost::encoding::key_len(tag) + encoded_len_varint(len as u64) + len
}

/// Where, in the encoded message `bytes` (fields in tag order, as prost writes them), the
/// first field with a tag above `tag` starts.
fn fields_below(bytes: &[u8], tag: u32) -> usize {
    let mut buf = bytes;
    while !buf.is_empty() {
        let start = bytes.len() - buf.len();
        let key = decode_varint(&mut buf).expect("prost wrote this key");
        if (key >> 3) as u32 > tag {
            return start;
        }
        let skip = match key & 7 {
            0 => {
                decode_varint(&mut buf).expect("prost wrote this varint");
                0
            }
            1 => 8,
            2 => decode_varint(&mut buf).expect("prost wrote this length") as usize,
            5 => 4,
            other => unreachable!("prost writes no wire type {other} in ONNX messages"),
        };
        buf = &buf[skip..];
    }
    bytes.len()
}

/// `model` without its graph (the other fields are small).
fn model_without_graph(model: &ModelProto) -> ModelProto {
    ModelProto {
        ir_version: model.ir_version,
        opset_import: model.opset_import.clone(),
        producer_name: model.producer_name.clone(),
        producer_version: model.producer_version.clone(),
        domain: model.domain.clone(),
        model_version: model.model_version,
        doc_string: model.doc_string.clone(),
        graph: None,
        metadata_props: model.metadata_props.clone(),
        training_info: model.training_info.clone(),
        functions: model.functions.clone(),
    }
}

/// `graph` without its initializers.
fn graph_without_initializers(graph: &GraphProto) -> GraphProto {
    let no_initializers: Vec<TensorProto> = Vec::new();
    GraphProto {
        node: graph.node.clone(),
        name: graph.name.clone(),
        initializer: no_initializers,
        sparse_initializer: graph.sparse_initializer.clone(),
        doc_string: graph.doc_string.clone(),
        input: graph.input.clone(),
        output: graph.output.clone(),
        value_info: graph.value_info.clone(),
        quantization_annotation: graph.quantization_annotation.clone(),
    }
}

#[cfg(test)]
mod tests;
