//! The check a rewritten model passes before it is written: it must open where such a model runs
//! by default, the default CPU backend (ONNX Runtime where it is installed, tract where it is not
//! or where ONNX Runtime cannot read the model), at batch 1 and at the shapes asked for. A model
//! whose other axes are left free opens on ONNX Runtime as it is; tract may need them fixed, and
//! a refusal then names them.

use crate::backend::open;
use crate::backend::ort_ir;
use crate::backend::select::{default_kind, BackendKind, BackendOptions, Fp16Compute, Runtime};
use crate::backend::Device;
use crate::error::{Hint, TypedError};
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::shape::{model_batch_axes, model_inputs, InputShapes, ShapeRequest};
use crate::onnx::OnnxModel;
use crate::tensor::Dim;
use crate::tensor::{BatchAxisChoice, BatchAxisRequest};
use anyhow::Result;

/// `" with free axes x[2], x[3]"`, or nothing when none was free.
fn free_note(free: &[String]) -> String {
    if free.is_empty() {
        String::new()
    } else {
        format!(" at batch 1 with free axes {}", free.join(", "))
    }
}

/// The runtime the check opens `model` on: the default CPU backend, tract standing in for an
/// ONNX Runtime that cannot read the model.
fn check_runtime(model: &OnnxModel) -> Runtime {
    let kind = match default_kind(Device::Cpu) {
        BackendKind::Ort if ort_ir::refusal(model).is_some() => BackendKind::Tract,
        kind => kind,
    };
    Runtime::of(kind, Device::Cpu)
}

/// The input axes of `model` besides the first that stay free at `shapes` (`x[2]`, with the
/// axis's name where it has one: `x[2] (height)`).
pub(crate) fn free_axes(model: &OnnxModel, shapes: &ShapeRequest) -> Vec<String> {
    let shaped;
    let model = if shapes.is_empty() {
        model
    } else {
        match InputShapes(shapes.clone()).run(model.clone()) {
            Ok((m, _)) => {
                shaped = m;
                &shaped
            }
            Err(_) => return vec![],
        }
    };
    let mut free = vec![];
    for input in model_inputs(model) {
        for (axis, dim) in input.dims.iter().flatten().enumerate().skip(1) {
            match dim {
                Dim::Fixed(_) => {}
                Dim::Symbol(s) if !s.is_empty() && s != "?" => {
                    free.push(format!("{}[{axis}] ({s})", input.name))
                }
                _ => free.push(format!("{}[{axis}]", input.name)),
            }
        }
    }
    free
}

/// Opens `model` on the default CPU backend at batch 1 and `shapes`; the runtime's name when it
/// opens; when it does not, an error saying so (with the backend's own error as its cause) whose
/// hint is to give the free axes sizes or to skip the check.
pub(crate) fn check_loads(model: &OnnxModel, shapes: &ShapeRequest) -> Result<String> {
    let runtime = check_runtime(model);
    let (kind, device) = runtime
        .kind_and_device()
        .expect("a CPU runtime runs ONNX models");
    // Where a tensor's batch axis cannot be told, the check opens it as it is: which axis holds
    // the samples does not change whether the model loads.
    let as_they_are = model_batch_axes(model, &BatchAxisRequest::default())
        .map(|axes| {
            let undecided = axes.undecided().into_iter().map(|name| BatchAxisChoice {
                name: name.to_string(),
                axis: None,
            });
            BatchAxisRequest(undecided.collect())
        })
        .unwrap_or_default();
    let options = BackendOptions {
        kind,
        device,
        threads: Some(1),
        input_shapes: shapes.clone(),
        batch: Some(1),
        batch_axes: as_they_are,
        kind_is_default: true,
        // The check is whether the backend opens the model as written, not its emulation.
        fp16_compute: Fp16Compute::Backend,
        ..Default::default()
    };
    match open(model, &options) {
        Ok(_) => Ok(runtime.name().to_string()),
        Err(e) => {
            let free = free_axes(model, shapes);
            let message = format!(
                "the rewritten model does not load in {}{}; nothing written",
                runtime.name(),
                free_note(&free)
            );
            let hint = Hint::SkipCheck {
                free_axes: !free.is_empty(),
            };
            Err(TypedError::hinted(hint, message).caused_by(e).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::shape::{DimSpec, InputShape};
    use crate::onnx::test_models;

    #[test]
    fn free_axes_are_the_inputs_unfixed_axes_past_the_batch() {
        let fixed = OnnxModel::from_proto(test_models::classifier(None), "c.onnx");
        assert!(free_axes(&fixed, &ShapeRequest::default()).is_empty());
        let paddle = OnnxModel::from_proto(test_models::paddle_style_pyramid(), "p.onnx");
        assert_eq!(
            free_axes(&paddle, &ShapeRequest::default()),
            ["x[2] (height)", "x[3] (width)"]
        );
        let given = ShapeRequest::shapes(vec![InputShape {
            name: None,
            dims: [-1, 3, 16, 24]
                .map(|d| match d {
                    -1 => DimSpec::Dynamic,
                    n => DimSpec::Fixed(n),
                })
                .to_vec(),
        }]);
        assert!(free_axes(&paddle, &given).is_empty());
    }

    #[test]
    fn tract_refuses_the_pyramid_with_free_sizes_and_opens_it_at_given_ones() {
        let paddle = OnnxModel::from_proto(test_models::paddle_style_pyramid(), "p.onnx");
        let tract = |shapes: ShapeRequest| {
            open(
                &paddle,
                &BackendOptions {
                    batch: Some(1),
                    input_shapes: shapes,
                    ..Default::default()
                },
            )
        };
        let err = format!("{:#}", tract(ShapeRequest::default()).err().unwrap());
        assert!(err.contains("tract cannot analyse"), "{err}");
        let given = ShapeRequest::shapes(
            crate::onnx::shape::parse_input_shapes(&["x:-1x3x16x24".into()]).unwrap(),
        );
        assert!(tract(given).is_ok());
    }

    /// A recurrent state `[layers, ?, hidden]` beside an input batched on an unnamed axis 0:
    /// which axis holds its samples cannot be told, and need not be for the model to open.
    #[test]
    fn an_input_whose_batch_axis_cannot_be_told_does_not_stop_the_check() {
        use crate::onnx::graph_builder::GraphBuilder;
        use crate::onnx::pb::tensor_proto::DataType;
        let mut g = GraphBuilder::new("state");
        let (free, d) = (Dim::Unknown, Dim::Fixed);
        g.input("x", DataType::Float, &[free.clone(), d(4)])
            .input("state", DataType::Float, &[d(2), free.clone(), d(4)])
            .output("y", DataType::Float, &[free.clone(), d(4)])
            .output("next", DataType::Float, &[d(2), free, d(4)])
            .node("Relu", &["x"], &["y"], vec![])
            .node("Relu", &["state"], &["next"], vec![]);
        let model = OnnxModel::from_proto(g.build(), "state.onnx");
        let said = check_loads(&model, &ShapeRequest::default());
        assert!(said.is_ok(), "{:#}", said.unwrap_err());
    }
}
