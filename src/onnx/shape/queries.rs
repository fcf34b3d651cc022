//! Questions about a model's inputs and outputs: the real inputs (not initializers), the
//! outputs, a batch every input is fixed to, the symbols of named axes, and whether an axis a
//! size is given to exists, is free and is not the batch axis.

use super::axis_ref::resolve_axis;
use crate::onnx::model::OnnxModel;
use crate::onnx::tensor_info::TensorInfo;
use crate::tensor::Dim;
use anyhow::Result;

/// The symbols of the model's input axes, each once, in order of appearance.
pub(crate) fn input_symbols(model: &OnnxModel) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for info in model_inputs(model) {
        for d in info.dims.iter().flatten() {
            if let Dim::Symbol(s) = d {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
        }
    }
    out
}

/// Checks that each axis named by symbol or by `INPUT:AXIS` is a free non-batch axis of some
/// input; the error lists the axes the model has.
pub(crate) fn check_named_axes<'a>(
    model: &OnnxModel,
    symbols: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    let inputs = model_inputs(model);
    for symbol in symbols {
        resolve_axis(&inputs, symbol)?;
    }
    Ok(())
}

/// The real inputs of a model: graph inputs that are not initializers.
pub fn model_inputs(model: &OnnxModel) -> Vec<TensorInfo> {
    let graph = model.graph();
    let inits: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name.as_str()).collect();
    graph
        .input
        .iter()
        .filter(|v| !inits.contains(v.name.as_str()))
        .map(TensorInfo::from_value_info)
        .collect()
}

/// The batch every input of `model` is fixed to, if any.
pub(crate) fn fixed_batch(model: &OnnxModel) -> Option<usize> {
    let inputs = model_inputs(model);
    let mut sizes = inputs.iter().map(|i| match i.dims.as_ref()?.first()? {
        Dim::Fixed(n) => Some(*n as usize),
        _ => None,
    });
    let first = sizes.next()??;
    sizes.all(|s| s == Some(first)).then_some(first)
}

/// The outputs of a model.
pub(crate) fn model_outputs(model: &OnnxModel) -> Vec<TensorInfo> {
    model
        .graph()
        .output
        .iter()
        .map(TensorInfo::from_value_info)
        .collect()
}
