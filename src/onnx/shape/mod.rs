//! Input-shape overrides (`--input-shape` on the command line): parsing, validation against
//! the model, and the two passes on input declarations, [`InputShapes`] and [`FixBatch`].
//!
//! Accepted forms:
//! - `-1 3 224 224` or `1x3x224x224` — the shape of the model's only input (`-1`: dynamic);
//! - `input:1x3x224x224` (repeatable) — a shape per named input, for multi-input models.
//!
//! Beside them, a named (symbolic) axis can be given one size for every input that carries it
//! ([`NamedDim`], `seq=128`), or, for an engine profile, a `min:opt:max` range ([`DimRange`]);
//! an axis is named by the model's symbol or by input and index (`x:3=320`), which also reaches
//! an axis the model leaves unnamed.
//! The same text grammar serves the flags and the bench plans.

mod axis_ref;
mod fix_batch;
mod grammar;
mod input_shapes;
mod queries;
mod request;

pub use axis_ref::NamedAxisError;
pub(crate) use axis_ref::{index_form, resolve_axis, AxisTarget};
pub(crate) use fix_batch::model_batch_axes;
pub use fix_batch::{shaped, Batch, FixBatch};
pub(crate) use grammar::parse_shape_tokens;
pub use grammar::{parse_dim_ranges, parse_input_shapes, parse_named_shapes};
pub(crate) use input_shapes::InputShapes;
pub use queries::model_inputs;
pub(crate) use queries::{check_named_axes, fixed_batch, input_symbols, model_outputs};
pub(crate) use request::dim_points;
pub use request::{
    DimRange, DimSpec, DimSweep, DimValues, InputShape, NamedDim, NamedShape, ShapeRequest,
};

/// The test model and the shape reading the pass tests of this folder share.
#[cfg(test)]
mod test_support {
    use super::{model_inputs, model_outputs};
    use crate::onnx::OnnxModel;

    /// The test classifier, with a fixed batch or a dynamic one.
    pub fn model(batch: Option<i64>) -> OnnxModel {
        OnnxModel::from_proto(crate::onnx::test_models::classifier(batch), "c.onnx")
    }

    /// The declared shape of the input or output `name`, as text.
    pub(crate) fn dims_of(m: &OnnxModel, name: &str) -> String {
        let all = model_inputs(m).into_iter().chain(model_outputs(m));
        all.filter(|i| i.name == name)
            .map(|i| i.shape_string())
            .next()
            .unwrap()
    }
}
