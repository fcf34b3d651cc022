//! The inputs and outputs a backend declares: name, element type and dims.

use super::{Dim, ElemType, HostTensor};
use crate::error::{ErrorKind, FreeAxis, Hint, TypedError};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One input or output of a backend: name, element type and dims (symbolic batch allowed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IoSpec {
    /// Tensor name.
    pub name: String,
    /// Element type.
    pub elem_type: ElemType,
    /// Dims as the backend will run them; `Dim::Symbol` for a dynamic axis.
    pub dims: Vec<Dim>,
}

/// A tensor axis other than the batch that is not fixed, so no concrete shape can be made. As an
/// `anyhow` error it is a [`TypedError`] of kind [`ErrorKind::UnfixedAxis`] whose hint names
/// the axis to size.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UnfixedAxis {
    /// The tensor.
    pub tensor: String,
    /// The axis.
    pub axis: usize,
    /// What the axis is instead of a size.
    pub dim: Dim,
    /// Every axis of the tensor, as declared.
    pub dims: Vec<Dim>,
}

impl fmt::Display for UnfixedAxis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tensor '{}': axis {} is '{}', which is not fixed",
            self.tensor, self.axis, self.dim
        )
    }
}

impl UnfixedAxis {
    /// The axis as a hint names it.
    pub(crate) fn free_axis(&self) -> FreeAxis {
        FreeAxis {
            tensor: self.tensor.clone(),
            axis: self.axis,
            symbol: match &self.dim {
                Dim::Symbol(s) => Some(s.clone()),
                _ => None,
            },
            shape: self
                .dims
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => Some(*n as usize),
                    _ => None,
                })
                .collect(),
        }
    }
}

impl From<UnfixedAxis> for anyhow::Error {
    fn from(e: UnfixedAxis) -> anyhow::Error {
        TypedError::new(ErrorKind::UnfixedAxis, e.to_string())
            .with_hint(Hint::SizeAxis(e.free_axis()))
            .into()
    }
}

impl IoSpec {
    /// Concrete dims for a batch size: axis 0 takes `batch` when it is not fixed; any other
    /// non-fixed axis is an [`UnfixedAxis`] error.
    pub(crate) fn concrete_shape(&self, batch: usize) -> Result<Vec<usize>, UnfixedAxis> {
        self.concrete_shape_on(Some(0), batch)
    }

    /// Concrete dims for a batch size with the batch on axis `batch_axis` (`None`: the tensor has
    /// no batch axis): that axis takes `batch` when it is not fixed; any other non-fixed axis is
    /// an [`UnfixedAxis`] error.
    pub(crate) fn concrete_shape_on(
        &self,
        batch_axis: Option<usize>,
        batch: usize,
    ) -> Result<Vec<usize>, UnfixedAxis> {
        self.dims
            .iter()
            .enumerate()
            .map(|(axis, d)| match d {
                Dim::Fixed(n) => Ok(*n as usize),
                _ if Some(axis) == batch_axis => Ok(batch),
                other => Err(UnfixedAxis {
                    tensor: self.name.clone(),
                    axis,
                    dim: other.clone(),
                    dims: self.dims.clone(),
                }),
            })
            .collect()
    }
}

/// Refuses a run with another number of tensors than the backend takes.
pub(crate) fn check_input_count(specs: &[IoSpec], inputs: &[HostTensor]) -> anyhow::Result<()> {
    if inputs.len() != specs.len() {
        anyhow::bail!(
            "the model takes {} inputs, got {}",
            specs.len(),
            inputs.len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_axis_takes_the_batch_other_axes_must_be_fixed() {
        let spec = IoSpec {
            name: "x".into(),
            elem_type: ElemType::F32,
            dims: vec![Dim::Symbol("N".into()), Dim::Fixed(3)],
        };
        assert_eq!(spec.concrete_shape(4).unwrap(), vec![4, 3]);
        let seq = IoSpec {
            dims: vec![Dim::Fixed(1), Dim::Symbol("seq".into())],
            ..spec
        };
        let err = seq.concrete_shape(1).unwrap_err();
        assert_eq!((err.axis, err.dim.to_string()), (1, "seq".to_string()));
        // A state batched on axis 1; a tensor with no batch axis must be fixed everywhere.
        assert_eq!(seq.concrete_shape_on(Some(1), 5).unwrap(), vec![1, 5]);
        assert_eq!(seq.concrete_shape_on(None, 5).unwrap_err().axis, 1);
    }
}
