//! The bottom of the crate: element types, host tensors, dims, I/O specs, precisions and the values
//! integer inputs take. It imports nothing
//! else of the crate, so every other module can use it without a cycle.

mod batch_axes;
mod conform;
mod dim;
mod host;
mod io_spec;
mod precision;
mod values;

pub use batch_axes::{BatchAxes, BatchAxisChoice, BatchAxisError, BatchAxisRequest, Declared};
pub(crate) use conform::{conform_floats, conversion_note};
pub use conform::{feeds, FloatConversion};
pub(crate) use dim::format_dims;
pub use dim::Dim;
pub use host::{ElemType, HostTensor, TensorData};
pub(crate) use io_spec::{check_input_count, IoSpec, UnfixedAxis};
pub use precision::Precision;
pub(crate) use values::IntInput;
