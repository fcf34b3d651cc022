//! How a `--dim` setting names an axis, and finding that axis in a model's inputs: by the
//! model's own name for it (`seq`, `p2o.DynamicDimension.1`), or by input and index (`x:3`),
//! which also reaches an axis the model leaves unnamed.

use crate::error::{Hint, Setting, TypedError};
use crate::onnx::tensor_info::TensorInfo;
use crate::tensor::Dim;
use std::fmt;

/// A size given to a named axis that the model's inputs do not have, or that is their batch
/// axis. As an `anyhow` error it is a [`TypedError`]; one naming the batch axis has the batch
/// size as its hint.
#[derive(Debug)]
pub enum NamedAxisError {
    /// No input has the axis.
    Unknown {
        /// The name asked for.
        symbol: String,
        /// The names the inputs have, as a phrase.
        known: String,
    },
    /// The axis is axis 0, whose size is the batch size.
    Batch {
        /// The name asked for.
        symbol: String,
    },
    /// An `INPUT:AXIS` reference to no free axis: no such input or axis, or a fixed one.
    NotFree {
        /// The reference as given.
        key: String,
        /// What the model has instead.
        why: String,
    },
}

impl fmt::Display for NamedAxisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamedAxisError::Unknown { symbol, known } => {
                write!(f, "no input has an axis named '{symbol}' ({known})")
            }
            NamedAxisError::Batch { symbol } => write!(
                f,
                "axis '{symbol}' is the batch axis; its size is the batch size"
            ),
            NamedAxisError::NotFree { key, why } => write!(f, "axis '{key}': {why}"),
        }
    }
}

impl From<NamedAxisError> for anyhow::Error {
    fn from(e: NamedAxisError) -> anyhow::Error {
        match e {
            NamedAxisError::Batch { .. } => {
                TypedError::hinted(Hint::Change(Setting::BatchSize), e.to_string()).into()
            }
            _ => anyhow::anyhow!("{e}"),
        }
    }
}

/// The axis (or axes) a `--dim` key stands for in one model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AxisTarget {
    /// Every input axis declared with this symbol.
    Symbol(String),
    /// One unnamed axis of one input.
    Position {
        /// The input.
        input: String,
        /// The axis index.
        axis: usize,
    },
}

impl AxisTarget {
    /// Whether axis `axis` of input `input`, declared as `dim`, is this target.
    pub(crate) fn matches(&self, input: &str, axis: usize, dim: &Dim) -> bool {
        match self {
            AxisTarget::Symbol(s) => matches!(dim, Dim::Symbol(d) if d == s),
            AxisTarget::Position { input: i, axis: a } => i == input && *a == axis,
        }
    }
}

/// `INPUT:AXIS` split into the input's name and the axis index, when `key` has that form.
pub(crate) fn index_form(key: &str) -> Option<(&str, usize)> {
    let (input, axis) = key.rsplit_once(':')?;
    let axis = axis.trim().parse::<usize>().ok()?;
    (!input.is_empty()).then_some((input, axis))
}

/// The axis `key` names in `inputs`: a symbol some input declares (as written), else an
/// `INPUT:AXIS` reference, which stands for the axis's symbol when it has one (so the size
/// reaches every input that shares it). The batch axis (axis 0), a fixed axis, an input or
/// axis the model does not have are errors that say what the model has.
pub(crate) fn resolve_axis(inputs: &[TensorInfo], key: &str) -> Result<AxisTarget, NamedAxisError> {
    let declared = |info: &TensorInfo| info.dims.clone().unwrap_or_default();
    let symbol_axes: Vec<usize> = inputs
        .iter()
        .flat_map(|i| {
            declared(i)
                .into_iter()
                .enumerate()
                .filter(|(_, d)| matches!(d, Dim::Symbol(s) if s == key))
                .map(|(axis, _)| axis)
        })
        .collect();
    if !symbol_axes.is_empty() {
        if symbol_axes.contains(&0) {
            return Err(NamedAxisError::Batch {
                symbol: key.to_string(),
            });
        }
        return Ok(AxisTarget::Symbol(key.to_string()));
    }
    let Some((name, axis)) = index_form(key) else {
        return Err(NamedAxisError::Unknown {
            symbol: key.to_string(),
            known: known_axes(inputs),
        });
    };
    let not_free = |why: String| NamedAxisError::NotFree {
        key: key.to_string(),
        why,
    };
    let Some(info) = inputs.iter().find(|i| i.name == name) else {
        let names: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
        return Err(not_free(format!(
            "the model has no input '{name}' (inputs: {})",
            names.join(", ")
        )));
    };
    let Some(dims) = &info.dims else {
        return Err(not_free(format!(
            "input '{name}' declares no shape; give its whole shape"
        )));
    };
    match dims.get(axis) {
        None => Err(not_free(format!(
            "input '{name}' has {} axes ({})",
            dims.len(),
            info.shape_string()
        ))),
        Some(_) if axis == 0 => Err(NamedAxisError::Batch {
            symbol: key.to_string(),
        }),
        Some(Dim::Fixed(n)) => Err(not_free(format!(
            "axis {axis} of input '{name}' is fixed to {n} in the model"
        ))),
        Some(Dim::Symbol(s)) => Ok(AxisTarget::Symbol(s.clone())),
        Some(Dim::Unknown) => Ok(AxisTarget::Position {
            input: name.to_string(),
            axis,
        }),
    }
}

/// The axes of `inputs` a size can be given to, as a phrase: the named ones, and the unnamed
/// ones as `INPUT:AXIS`.
pub(crate) fn known_axes(inputs: &[TensorInfo]) -> String {
    let mut named: Vec<String> = vec![];
    let mut unnamed: Vec<String> = vec![];
    for info in inputs {
        for (axis, d) in info.dims.iter().flatten().enumerate() {
            match d {
                Dim::Symbol(s) if !named.contains(s) => named.push(s.clone()),
                Dim::Unknown if axis > 0 => unnamed.push(format!("{}:{axis}", info.name)),
                _ => {}
            }
        }
    }
    match (named.is_empty(), unnamed.is_empty()) {
        (true, true) => "the inputs have no named or unnamed free axes".to_string(),
        (false, true) => format!("named axes: {}", named.join(", ")),
        (true, false) => format!(
            "the inputs have no named axes; unnamed axes, by input and index: {}",
            unnamed.join(", ")
        ),
        (false, false) => format!(
            "named axes: {}; unnamed axes, by input and index: {}",
            named.join(", "),
            unnamed.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(name: &str, dims: Vec<Dim>) -> TensorInfo {
        TensorInfo::float32(name, dims)
    }

    #[test]
    fn keys_name_symbols_or_positions() {
        let sym = |s: &str| Dim::Symbol(s.into());
        let inputs = [input(
            "x",
            vec![
                sym("p2o.DynamicDimension.0"),
                Dim::Fixed(3),
                Dim::Unknown,
                sym("p2o.DynamicDimension.1"),
            ],
        )];
        assert_eq!(
            resolve_axis(&inputs, "p2o.DynamicDimension.1").unwrap(),
            AxisTarget::Symbol("p2o.DynamicDimension.1".into())
        );
        assert_eq!(
            resolve_axis(&inputs, "x:3").unwrap(),
            AxisTarget::Symbol("p2o.DynamicDimension.1".into())
        );
        let h = resolve_axis(&inputs, "x:2").unwrap();
        assert!(h.matches("x", 2, &Dim::Unknown));
        assert!(!h.matches("x", 3, &Dim::Unknown));
        for (key, needle) in [
            ("x:0", "batch axis"),
            ("p2o.DynamicDimension.0", "batch axis"),
            ("x:1", "fixed to 3"),
            ("x:4", "has 4 axes"),
            ("y:2", "no input 'y'"),
            ("dim2", "unnamed axes, by input and index: x:2"),
        ] {
            let err = resolve_axis(&inputs, key).unwrap_err().to_string();
            assert!(err.contains(needle), "{key}: {err}");
        }
        // A symbol that looks like an index form is still the symbol.
        let odd = [input("x", vec![sym("b"), sym("y:1")])];
        assert_eq!(
            resolve_axis(&odd, "y:1").unwrap(),
            AxisTarget::Symbol("y:1".into())
        );
        assert_eq!(index_form("image:0:2"), Some(("image:0", 2)));
        assert_eq!(index_form("seq"), None);
    }
}
