//! Names, element types and dims of graph inputs/outputs, read from `ValueInfoProto`.

use super::dtype::dtype_name;
use super::pb::tensor_shape_proto::{dimension, Dimension};
use super::pb::type_proto::{self, Tensor as TensorType};
use super::pb::{TensorShapeProto, TypeProto, ValueInfoProto};
use crate::tensor::{format_dims, Dim};
use serde::{Deserialize, Serialize};

/// The proto form of a dim.
pub(crate) fn dim_to_proto(dim: &Dim) -> Dimension {
    let value = match dim {
        Dim::Fixed(n) => Some(dimension::Value::DimValue(*n)),
        Dim::Symbol(s) => Some(dimension::Value::DimParam(s.clone())),
        Dim::Unknown => None,
    };
    Dimension {
        value,
        ..Default::default()
    }
}

/// Reads a proto dim; a negative or absent value is unknown.
pub(crate) fn dim_from_proto(d: &Dimension) -> Dim {
    match &d.value {
        Some(dimension::Value::DimValue(n)) if *n >= 0 => Dim::Fixed(*n),
        // Paddle writes `?` (and some exporters `-1`) for "unknown": names that tie no axes.
        Some(dimension::Value::DimParam(s)) if !is_placeholder(s) => Dim::Symbol(s.clone()),
        _ => Dim::Unknown,
    }
}

/// Whether a dim_param says "unknown" rather than naming a size: empty, `?`, or a number
/// such as `-1`. Two axes with such a name are not the same size.
pub(crate) fn is_placeholder(name: &str) -> bool {
    name.is_empty() || name == "?" || name.parse::<i64>().is_ok()
}

/// A graph input or output: name, element type and (if declared) dims.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorInfo {
    /// Tensor name in the graph.
    pub name: String,
    /// Element type, e.g. `float32`.
    pub dtype: String,
    /// ONNX element type code.
    #[serde(skip)]
    pub(crate) dtype_code: i32,
    /// Dims, or `None` when the model does not declare a shape.
    pub dims: Option<Vec<Dim>>,
}

impl TensorInfo {
    /// A float32 tensor `name` with these dims, as tests declare inputs.
    #[cfg(test)]
    pub(crate) fn float32(name: &str, dims: Vec<Dim>) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            dtype: "float32".into(),
            dtype_code: 1,
            dims: Some(dims),
        }
    }

    /// Reads name, type and shape from a value info.
    pub(crate) fn from_value_info(v: &ValueInfoProto) -> TensorInfo {
        let tensor = tensor_type(v);
        let dtype_code = tensor.map(|t| t.elem_type).unwrap_or(0);
        let dims = tensor
            .and_then(|t| t.shape.as_ref())
            .map(|s| s.dim.iter().map(dim_from_proto).collect());
        TensorInfo {
            name: v.name.clone(),
            dtype: dtype_name(dtype_code),
            dtype_code,
            dims,
        }
    }

    /// The dims formatted for people (`?` when the shape is not declared).
    pub(crate) fn shape_string(&self) -> String {
        self.dims
            .as_deref()
            .map(format_dims)
            .unwrap_or_else(|| "?".into())
    }
}

/// The tensor type of a value info, if it is a tensor.
pub(crate) fn tensor_type(v: &ValueInfoProto) -> Option<&TensorType> {
    match v.r#type.as_ref()?.value.as_ref()? {
        type_proto::Value::TensorType(t) => Some(t),
    }
}

/// The tensor type of a value info, mutable, if it is a tensor.
pub(crate) fn tensor_type_mut(v: &mut ValueInfoProto) -> Option<&mut TensorType> {
    match v.r#type.as_mut()?.value.as_mut()? {
        type_proto::Value::TensorType(t) => Some(t),
    }
}

/// A tensor value info with an element type and no shape at all (an empty dims list would
/// declare a scalar): for outputs whose shape the backend infers.
pub(crate) fn unshaped_value_info(name: &str, elem_type: i32) -> ValueInfoProto {
    let mut v = value_info(name, elem_type, &[]);
    if let Some(t) = tensor_type_mut(&mut v) {
        t.shape = None;
    }
    v
}

/// Builds a tensor value info with the given element type and dims.
pub(crate) fn value_info(name: &str, elem_type: i32, dims: &[Dim]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(TensorType {
                elem_type,
                shape: Some(TensorShapeProto {
                    dim: dims.iter().map(dim_to_proto).collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Replaces the dims of a tensor value info (no-op for non-tensor types).
pub fn set_dims(v: &mut ValueInfoProto, dims: &[Dim]) {
    if let Some(t) = tensor_type_mut(v) {
        t.shape = Some(TensorShapeProto {
            dim: dims.iter().map(dim_to_proto).collect(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_symbolic_and_fixed_dims() {
        let v = value_info(
            "x",
            1,
            &[Dim::Symbol("batch".into()), Dim::Fixed(3), Dim::Unknown],
        );
        let info = TensorInfo::from_value_info(&v);
        assert_eq!(info.shape_string(), "batch×3×?");
        assert_eq!(info.dtype, "float32");
        assert_eq!(
            serde_json::to_string(&info.dims).unwrap(),
            r#"["batch",3,"?"]"#
        );
    }

    #[test]
    fn placeholder_names_are_unknown_dims_not_symbols() {
        let v = value_info("x", 1, &[Dim::Symbol("?".into()), Dim::Symbol("-1".into())]);
        let info = TensorInfo::from_value_info(&v);
        assert_eq!(info.dims, Some(vec![Dim::Unknown, Dim::Unknown]));
        let named = value_info("x", 1, &[Dim::Symbol("seq_1".into())]);
        let info = TensorInfo::from_value_info(&named);
        assert_eq!(info.dims, Some(vec![Dim::Symbol("seq_1".into())]));
    }
}
