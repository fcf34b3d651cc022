//! tract's analysis errors in words: `Failed analyse for node #12 "name" Unimplemented(Loop):
//! DETAIL` becomes which node, of which op, tract does not run, and why in tract's own terms; a
//! model refused because an input axis is neither a size nor a name gets the error that says
//! which axis to size, as the other backends give it.

use crate::error::{ErrorKind, TypedError};
use crate::onnx::shape::model_inputs;
use crate::onnx::OnnxModel;
use crate::tensor::{BatchAxes, Dim, UnfixedAxis};

/// The error of a `model` tract could not analyse, from tract's error `text`. Tract needs every
/// input axis known: where the refusal is not an op tract lacks and an input axis other than its
/// batch is neither a size nor a name (`?`), the error is that axis to size
/// ([`UnfixedAxis`], with its hint); otherwise tract's reason in words, after the file.
pub(super) fn analysis_error(model: &OnnxModel, axes: &BatchAxes, text: &str) -> anyhow::Error {
    if !text.contains("Unimplemented(") {
        if let Some(free) = unnamed_free_axis(model, axes) {
            return free.into();
        }
    }
    let message = format!("{}: {}", model.path.display(), analysis_refusal(text));
    TypedError::new(ErrorKind::BackendRefusedModel, message).into()
}

/// The first input axis, other than the input's batch axis, that is neither a size nor a name;
/// its dims show the batch axis free (the batch tract was prepared for is not the user's).
fn unnamed_free_axis(model: &OnnxModel, axes: &BatchAxes) -> Option<UnfixedAxis> {
    model_inputs(model).into_iter().find_map(|input| {
        let mut dims = input.dims?;
        let batch = axes.axis(&input.name).ok().flatten();
        let axis = (0..dims.len()).find(|&k| dims[k] == Dim::Unknown && Some(k) != batch)?;
        if let Some(d) = batch.and_then(|b| dims.get_mut(b)) {
            *d = Dim::Unknown;
        }
        Some(UnfixedAxis {
            tensor: input.name,
            axis,
            dim: Dim::Unknown,
            dims,
        })
    })
}

/// The clause that says why tract cannot analyse a model, from its error `text`: the node and
/// op it does not implement where the text says so, the text itself otherwise.
pub(super) fn analysis_refusal(text: &str) -> String {
    let unimplemented = text.split_once("Unimplemented(").and_then(|(head, tail)| {
        let (op, detail) = tail.split_once(')')?;
        let node = head.rsplit_once(" \"")?.1.split('"').next()?;
        let detail = detail.trim_start_matches(':').trim();
        Some((node, op, detail))
    });
    match unimplemented {
        Some((node, op, detail)) if !detail.is_empty() => format!(
            "tract does not run node '{node}' ({op}) as this model uses it ({})",
            detail.trim_end_matches('.')
        ),
        Some((node, op, _)) => format!("tract does not run node '{node}' ({op})"),
        None => format!("tract cannot analyse the model: {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unimplemented_op_is_named_with_its_node() {
        assert_eq!(
            analysis_refusal(
                "Failed analyse for node #1246 \"p2o.Loop.0\" Unimplemented(Loop): Wrong number \
                 of outputs. Op says 1, node says 23."
            ),
            "tract does not run node 'p2o.Loop.0' (Loop) as this model uses it (Wrong number of \
             outputs. Op says 1, node says 23)"
        );
        assert_eq!(
            analysis_refusal("Impossible to unify"),
            "tract cannot analyse the model: Impossible to unify"
        );
    }
}
