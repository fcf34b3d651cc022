//! The plan's swept named axes (`--dim seq=64,128`): their sizes checked, and found in each
//! model's inputs (an axis that is a model's batch axis is refused).

use crate::onnx::shape::{
    check_named_axes, index_form, input_symbols, model_inputs, resolve_axis, DimSweep,
    NamedAxisError,
};
use crate::onnx::OnnxModel;
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// The named input axes of `model`, and the swept axes among them, each with its sizes; an
/// axis that is the batch axis of the model is an error.
pub(crate) fn dims_of_model(
    model: &Path,
    dims: &BTreeMap<String, Vec<i64>>,
) -> Result<(Vec<String>, DimSweep)> {
    let loaded = OnnxModel::load(model)?;
    let symbols = input_symbols(&loaded);
    let inputs = model_inputs(&loaded);
    // A key names an axis of this model by its symbol, or as `INPUT:AXIS` of an input it has.
    let has_axis = |key: &str| {
        symbols.iter().any(|s| s == key)
            || index_form(key).is_some_and(|(input, axis)| {
                inputs
                    .iter()
                    .any(|i| i.name == input && i.dims.as_ref().is_some_and(|d| axis < d.len()))
            })
    };
    let mut out = vec![];
    for (symbol, sizes) in dims.iter().filter(|(s, _)| has_axis(s)) {
        if let Err(NamedAxisError::Batch { .. }) = resolve_axis(&inputs, symbol) {
            bail!(
                "{}: axis '{symbol}' is the batch axis; sweep it with --batch-sizes",
                model.display()
            );
        }
        if let Err(e) = check_named_axes(&loaded, [symbol.as_str()]) {
            return Err(e.context(model.display().to_string()));
        }
        out.push((symbol.clone(), sizes.clone()));
    }
    Ok((symbols, out))
}

/// The plan's swept axes, checked: sizes at least 1, ascending, each once.
pub(crate) fn checked_dims(
    dims: Option<BTreeMap<String, Vec<i64>>>,
) -> Result<BTreeMap<String, Vec<i64>>> {
    let mut out = BTreeMap::new();
    for (symbol, mut sizes) in dims.unwrap_or_default() {
        if sizes.is_empty() {
            bail!("dims: axis '{symbol}' has no sizes (e.g. {symbol} = [64, 128])");
        }
        if let Some(bad) = sizes.iter().find(|&&s| s < 1) {
            bail!("dims: axis '{symbol}' has size {bad}; sizes are at least 1");
        }
        sizes.sort_unstable();
        sizes.dedup();
        out.insert(symbol, sizes);
    }
    Ok(out)
}
