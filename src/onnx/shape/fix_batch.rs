//! The batch pass, [`FixBatch`]: axis 0 of every input fixed to one size, or made a dynamic
//! `batch` axis in inputs and outputs.

use super::input_shapes::apply_input_shapes;
use super::queries::model_inputs;
use super::request::{DimSpec, InputShape, ShapeRequest, BATCH_SYMBOL};
use crate::onnx::model::OnnxModel;
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::rewrite::pass::PassReport;
use crate::onnx::tensor_info::{set_dims, TensorInfo};
use crate::tensor::{format_dims, Dim};
use anyhow::{bail, Result};

/// The batch pass: axis 0 of every input fixed to a size, or made dynamic (see [`Batch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixBatch(pub Batch);

impl Pass for FixBatch {
    fn name(&self) -> &'static str {
        "fix-batch"
    }

    fn run(&self, mut model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let changed = set_batch(&mut model, self.0)?;
        let batch = match self.0 {
            Batch::Static(n) => Some(n),
            Batch::Dynamic => None,
        };
        Ok((model, PassReport::FixBatch { batch, changed }))
    }
}

/// Batch size for the batch pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batch {
    /// Fix axis 0 of every input to this size.
    Static(i64),
    /// Make axis 0 of every input and output a symbolic `batch` axis.
    Dynamic,
}

/// Makes a model static at batch N, or dynamic in batch (inputs, outputs, value_info); returns
/// the inputs whose declaration changed.
///
/// Static: the symbol on axis 0 of the inputs is replaced by N everywhere it appears. Dynamic:
/// axis 0 of inputs and outputs becomes `batch`, and value_info (optional shape hints) is dropped
/// because it may pin the old batch; Reshape constants inside the graph are not rewritten.
fn set_batch(model: &mut OnnxModel, batch: Batch) -> Result<Vec<String>> {
    let inputs = model_inputs(model);
    if inputs.is_empty() {
        bail!("the model has no inputs to set a batch size on");
    }
    for info in &inputs {
        match info.dims.as_deref() {
            Some([]) => bail!("input '{}' is a scalar and has no batch axis", info.name),
            None => bail!(
                "input '{}' declares no shape, so its batch axis is unknown",
                info.name
            ),
            _ => {}
        }
    }
    match batch {
        Batch::Static(n) => {
            if n <= 0 {
                bail!("batch size must be positive, got {n}");
            }
            let shapes: Vec<InputShape> = inputs
                .iter()
                .map(|info| {
                    let dims = info.dims.as_ref().expect("checked above");
                    if let Dim::Fixed(m) = dims[0] {
                        if m != n {
                            bail!(
                                "input '{}' has a fixed batch of {m} ({}); it cannot run at batch {n} (re-export it with a dynamic batch axis)",
                                info.name,
                                format_dims(dims)
                            );
                        }
                    }
                    let mut spec: Vec<DimSpec> = dims
                        .iter()
                        .map(|d| match d {
                            Dim::Fixed(m) => DimSpec::Fixed(*m),
                            _ => DimSpec::Dynamic,
                        })
                        .collect();
                    spec[0] = DimSpec::Fixed(n);
                    Ok(InputShape { name: Some(info.name.clone()), dims: spec })
                })
                .collect::<Result<_>>()?;
            apply_input_shapes(model, &ShapeRequest::shapes(shapes))
        }
        Batch::Dynamic => {
            let graph = model.graph_mut();
            let input_names: Vec<String> = inputs.iter().map(|i| i.name.clone()).collect();
            let mut changed = Vec::new();
            for v in graph
                .input
                .iter_mut()
                .filter(|v| input_names.contains(&v.name))
                .chain(graph.output.iter_mut())
            {
                let info = TensorInfo::from_value_info(v);
                if let Some(mut dims) = info.dims.filter(|d| !d.is_empty()) {
                    let is_input = input_names.contains(&v.name);
                    let before = v.clone();
                    dims[0] = Dim::Symbol(BATCH_SYMBOL.into());
                    set_dims(v, &dims);
                    if is_input && *v != before {
                        changed.push(v.name.clone());
                    }
                }
            }
            graph.value_info.clear();
            Ok(changed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::shape::test_support::{dims_of, model};

    #[test]
    fn fix_batch_pass_static_and_dynamic() {
        assert_eq!(FixBatch(Batch::Dynamic).name(), "fix-batch");
        let (m, report) = FixBatch(Batch::Static(4)).run(model(None)).unwrap();
        assert_eq!(
            report,
            PassReport::FixBatch {
                batch: Some(4),
                changed: vec!["input".into()]
            }
        );
        assert!(dims_of(&m, "input").starts_with("4×"));
        let (m, report) = FixBatch(Batch::Dynamic).run(m).unwrap();
        assert_eq!(
            report,
            PassReport::FixBatch {
                batch: None,
                changed: vec!["input".into()]
            }
        );
        assert!(dims_of(&m, "input").starts_with(BATCH_SYMBOL));
        assert!(dims_of(&m, "logits").starts_with(BATCH_SYMBOL));
        let err = FixBatch(Batch::Static(2)).run(model(Some(1))).unwrap_err();
        assert!(err.to_string().contains("fixed batch of 1"), "{err}");
        assert!(FixBatch(Batch::Static(0)).run(model(None)).is_err());
    }
}
