//! Decoding an ONNX model without the bytes of its large float32 weights, which stay in the
//! file's bytes until a step needs them.
//!
//! prost copies every `raw_data` while decoding: 97 MiB for a ResNet-50, which an FP32 build at
//! the model's own shapes never reads (TensorRT parses the file's own bytes). Here the
//! protobuf wire format is walked once, the `raw_data` of each large float32 initializer is
//! left out of a copy of the message (its place in the file is kept), and that much smaller
//! copy is decoded. [`DeferredWeights::restore`] puts the exact bytes back, on every core.
//!
//! Anything unusual on the wire (a graph given twice, a deprecated group, a truncated field)
//! makes the walk give up and the whole model is decoded as usual, so errors are the usual ones.

use super::pb::{GraphProto, ModelProto};
use prost::Message;
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};
use std::ops::Range;

/// `raw_data` of float32 initializers shorter than this is decoded as usual.
pub(crate) const DEFER_FROM_BYTES: usize = 4096;

/// ModelProto.graph, GraphProto.initializer, TensorProto.data_type and .raw_data.
const MODEL_GRAPH: u64 = 7;
const GRAPH_INITIALIZER: u64 = 5;
const TENSOR_DATA_TYPE: u64 = 2;
const TENSOR_RAW_DATA: u64 = 9;
const FLOAT: u64 = 1;

/// A left-out `raw_data`: the initializer's index in `graph.initializer`, and the byte range of
/// its data in the file.
type Slot = (usize, Range<usize>);

/// Where the left-out weights of a model decoded by [`decode_deferring`] are in its file.
#[derive(Debug, Default)]
pub struct DeferredWeights {
    slots: Vec<Slot>,
}

impl DeferredWeights {
    /// Whether no weights were left out.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes left out.
    pub fn bytes(&self) -> usize {
        self.slots.iter().map(|(_, r)| r.len()).sum()
    }

    /// The length of each left-out `raw_data`, by the initializer's index in the graph.
    pub fn lengths(&self) -> HashMap<usize, u64> {
        self.slots
            .iter()
            .map(|(i, r)| (*i, r.len() as u64))
            .collect()
    }

    /// Puts the left-out `raw_data` back into `graph` from `file`, the bytes the model was
    /// decoded from; afterwards the graph is what a full decode gives, and `self` is empty.
    pub(crate) fn restore(&mut self, graph: &mut GraphProto, file: &[u8]) {
        let mut wanted: Vec<Option<Range<usize>>> = vec![None; graph.initializer.len()];
        for (index, range) in self.slots.drain(..) {
            wanted[index] = Some(range);
        }
        graph
            .initializer
            .par_iter_mut()
            .zip(wanted.into_par_iter())
            .for_each(|(t, range)| {
                if let Some(r) = range {
                    t.raw_data = file[r].to_vec();
                }
            });
    }
}

impl DeferredWeights {
    /// Puts back the left-out `raw_data` of the initializers named in `names` only.
    pub(crate) fn restore_named(
        &mut self,
        graph: &mut GraphProto,
        file: &[u8],
        names: &HashSet<String>,
    ) {
        let (now, later): (Vec<Slot>, Vec<Slot>) = std::mem::take(&mut self.slots)
            .into_iter()
            .partition(|(i, _)| names.contains(&graph.initializer[*i].name));
        self.slots = now;
        self.restore(graph, file);
        self.slots = later;
    }

    /// The left-out data by initializer name (for a step that renames or drops initializers
    /// before it reads them); `self` is empty afterwards.
    pub(crate) fn into_named(mut self, graph: &GraphProto) -> HashMap<String, Range<usize>> {
        self.slots
            .drain(..)
            .map(|(i, r)| (graph.initializer[i].name.clone(), r))
            .collect()
    }
}

/// Decodes `bytes` as a ModelProto, leaving out the `raw_data` of float32 initializers of at
/// least [`DEFER_FROM_BYTES`] (see the module comment). Errors are prost's.
pub(crate) fn decode_deferring(
    bytes: &[u8],
) -> Result<(ModelProto, DeferredWeights), prost::DecodeError> {
    if let Some((skeleton, slots)) = skeleton(bytes) {
        if !slots.is_empty() {
            let model = ModelProto::decode(skeleton.as_slice())?;
            let count = model.graph.as_ref().map_or(0, |g| g.initializer.len());
            if slots.iter().all(|(i, _)| *i < count) {
                return Ok((model, DeferredWeights { slots }));
            }
        }
    }
    Ok((ModelProto::decode(bytes)?, DeferredWeights::default()))
}

/// One field on the wire: its number, wire type, where it starts, and where its payload is.
struct Field {
    number: u64,
    wire_type: u64,
    start: usize,
    payload: Range<usize>,
    /// The varint's value, for wire type 0.
    value: u64,
}

fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The fields of the message in `bytes[range]`, or `None` on anything unusual.
fn fields(bytes: &[u8], range: Range<usize>) -> Option<Vec<Field>> {
    let mut out = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let start = at;
        let key = varint(bytes, &mut at)?;
        let (number, wire_type) = (key >> 3, key & 7);
        let mut value = 0;
        let payload = match wire_type {
            0 => {
                value = varint(bytes, &mut at)?;
                at..at
            }
            1 => at..at.checked_add(8)?,
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?).ok()?;
                at..at.checked_add(len)?
            }
            5 => at..at.checked_add(4)?,
            _ => return None,
        };
        if payload.end > range.end {
            return None;
        }
        at = payload.end.max(at);
        out.push(Field {
            number,
            wire_type,
            start,
            payload,
            value,
        });
    }
    Some(out)
}

/// A copy of the ModelProto in `bytes` without the deferred `raw_data`, and where each was.
fn skeleton(bytes: &[u8]) -> Option<(Vec<u8>, Vec<Slot>)> {
    let mut out = Vec::new();
    let mut slots = Vec::new();
    let mut graphs = 0;
    for f in fields(bytes, 0..bytes.len())? {
        if f.number == MODEL_GRAPH && f.wire_type == 2 {
            graphs += 1;
            if graphs > 1 {
                return None;
            }
            let graph = graph_skeleton(bytes, f.payload.clone(), &mut slots)?;
            put_varint(&mut out, MODEL_GRAPH << 3 | 2);
            put_varint(&mut out, graph.len() as u64);
            out.extend_from_slice(&graph);
        } else {
            out.extend_from_slice(&bytes[f.start..f.payload.end]);
        }
    }
    Some((out, slots))
}

fn graph_skeleton(bytes: &[u8], range: Range<usize>, slots: &mut Vec<Slot>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut index = 0;
    for f in fields(bytes, range)? {
        if f.number == GRAPH_INITIALIZER && f.wire_type == 2 {
            let (tensor, left_out) = tensor_skeleton(bytes, f.payload.clone())?;
            if let Some(r) = left_out {
                slots.push((index, r));
            }
            index += 1;
            put_varint(&mut out, GRAPH_INITIALIZER << 3 | 2);
            put_varint(&mut out, tensor.len() as u64);
            out.extend_from_slice(&tensor);
        } else {
            out.extend_from_slice(&bytes[f.start..f.payload.end]);
        }
    }
    Some(out)
}

/// A TensorProto without its `raw_data` when that is float32 and large (and its range), else
/// the tensor as it is.
fn tensor_skeleton(bytes: &[u8], range: Range<usize>) -> Option<(Vec<u8>, Option<Range<usize>>)> {
    let fields = fields(bytes, range.clone())?;
    let mut data_type = None;
    let mut raw = None;
    for f in &fields {
        match (f.number, f.wire_type) {
            (TENSOR_DATA_TYPE, 0) => data_type = Some(f.value),
            (TENSOR_RAW_DATA, 2) => raw = Some(f.payload.clone()),
            _ => {}
        }
    }
    let defer = data_type == Some(FLOAT)
        && raw.as_ref().is_some_and(|r| r.len() >= DEFER_FROM_BYTES)
        && fields
            .iter()
            .filter(|f| f.number == TENSOR_RAW_DATA)
            .count()
            == 1;
    if !defer {
        return Some((bytes[range].to_vec(), None));
    }
    let mut out = Vec::new();
    for f in fields.iter().filter(|f| f.number != TENSOR_RAW_DATA) {
        out.extend_from_slice(&bytes[f.start..f.payload.end]);
    }
    Some((out, raw))
}

#[cfg(test)]
mod tests;
