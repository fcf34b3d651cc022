//! The batch pass, [`FixBatch`]: the batch axis of every input fixed to one size, or made a
//! dynamic `batch` axis in inputs and outputs; and [`model_batch_axes`], where each input and
//! output of a model holds its samples.

use super::input_shapes::{apply_input_shapes, InputShapes};
use super::queries::{model_inputs, model_outputs};
use super::request::{DimSpec, InputShape, ShapeRequest, BATCH_SYMBOL};
use crate::onnx::model::OnnxModel;
use crate::onnx::rewrite::pass::PassReport;
use crate::onnx::rewrite::pass::{run_pass, Pass};
use crate::onnx::tensor_info::{set_dims, TensorInfo};
use crate::tensor::{format_dims, BatchAxes, BatchAxisRequest, Declared, Dim};
use anyhow::{bail, Context, Result};

/// The batch pass: the batch axis of every input fixed to a size, or made dynamic (see
/// [`Batch`]). Each input's batch axis is the one [`model_batch_axes`] finds, `axes` over it;
/// an input with no batch axis is left as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixBatch {
    /// The size, or dynamic.
    pub batch: Batch,
    /// Batch axes given by hand.
    pub axes: BatchAxisRequest,
}

impl FixBatch {
    /// The pass at `batch`, every batch axis found from the model.
    pub fn new(batch: Batch) -> FixBatch {
        FixBatch {
            batch,
            axes: BatchAxisRequest::default(),
        }
    }

    /// The pass at `batch`, with the batch axes `axes` given by hand.
    pub(crate) fn with_axes(batch: Batch, axes: &BatchAxisRequest) -> FixBatch {
        FixBatch {
            batch,
            axes: axes.clone(),
        }
    }
}

impl Pass for FixBatch {
    fn name(&self) -> &'static str {
        "fix-batch"
    }

    fn run(&self, mut model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let changed = set_batch(&mut model, self.batch, &self.axes)?;
        let batch = match self.batch {
            Batch::Static(n) => Some(n),
            Batch::Dynamic => None,
        };
        Ok((model, PassReport::FixBatch { batch, changed }))
    }
}

/// Batch size for the batch pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batch {
    /// Fix the batch axis of every input to this size.
    Static(i64),
    /// Make the batch axis of every input and output a symbolic `batch` axis.
    Dynamic,
}

/// Where each input and output of `model` holds its samples: found from the axes its inputs
/// declare (see [`BatchAxes::infer`]), `request` over them. Errors name the model.
pub(crate) fn model_batch_axes(model: &OnnxModel, request: &BatchAxisRequest) -> Result<BatchAxes> {
    let (inputs, outputs) = (model_inputs(model), model_outputs(model));
    BatchAxes::infer(&declared(&inputs), &declared(&outputs), request)
        .with_context(|| model.path.display().to_string())
}

/// `model` made ready to run, in the one order every backend and the shape inference follow: the
/// input shapes `request` gives applied; where its inputs and outputs hold their samples read
/// (`axes` naming any the model does not declare), before a fixed batch could hide it; then its
/// batch fixed at what `plan` says of that model and those axes (left as it is for `None`).
/// Returns the model, its batch axes and what `plan` decided beside the batch.
pub fn shaped<T>(
    mut model: OnnxModel,
    request: &ShapeRequest,
    axes: &BatchAxisRequest,
    plan: impl FnOnce(&OnnxModel, &BatchAxes) -> (Option<usize>, T),
) -> Result<(OnnxModel, BatchAxes, T)> {
    if !request.is_empty() {
        model = run_pass(model, &InputShapes(request.clone()))?;
    }
    let found = model_batch_axes(&model, axes)?;
    let (batch, planned) = plan(&model, &found);
    if let Some(n) = batch {
        model = run_pass(model, &FixBatch::with_axes(Batch::Static(n as i64), axes))?;
    }
    Ok((model, found, planned))
}

/// Names and declared dims, as the batch-axis inference reads them.
fn declared(list: &[TensorInfo]) -> Vec<Declared<'_>> {
    list.iter()
        .map(|t| Declared {
            name: &t.name,
            dims: t.dims.as_deref(),
        })
        .collect()
}

/// Makes a model static at batch N, or dynamic in batch (inputs, outputs, value_info); returns
/// the inputs whose declaration changed.
///
/// Static: each input's batch axis is set to N, and the symbol it carries replaced by N wherever
/// it appears. Dynamic: the batch axis of inputs and outputs becomes `batch`, and value_info
/// (optional shape hints) is dropped because it may pin the old batch; Reshape constants inside
/// the graph are not rewritten. Inputs with no batch axis are left as they are.
fn set_batch(
    model: &mut OnnxModel,
    batch: Batch,
    request: &BatchAxisRequest,
) -> Result<Vec<String>> {
    let inputs = model_inputs(model);
    if inputs.is_empty() {
        bail!("the model has no inputs to set a batch size on");
    }
    let axes = model_batch_axes(model, request)?;
    let mut batched: Vec<(&TensorInfo, usize)> = vec![];
    for info in &inputs {
        let Some(k) = axes.axis(&info.name)? else {
            continue;
        };
        match info.dims.as_deref() {
            Some([]) => bail!("input '{}' is a scalar and has no batch axis", info.name),
            None => bail!(
                "input '{}' declares no shape, so its batch axis is unknown",
                info.name
            ),
            _ => batched.push((info, k)),
        }
    }
    match batch {
        Batch::Static(n) => {
            if n <= 0 {
                bail!("batch size must be positive, got {n}");
            }
            let shapes = batched
                .iter()
                .map(|&(info, k)| static_shape(info, k, n))
                .collect::<Result<_>>()?;
            apply_input_shapes(model, &ShapeRequest::shapes(shapes))
        }
        Batch::Dynamic => {
            let graph = model.graph_mut();
            let input_axes: Vec<(String, usize)> = batched
                .iter()
                .map(|(info, k)| (info.name.clone(), *k))
                .collect();
            let mut changed = Vec::new();
            for v in graph.input.iter_mut() {
                let Some((_, k)) = input_axes.iter().find(|(n, _)| *n == v.name) else {
                    continue;
                };
                let before = v.clone();
                set_axis_dynamic(v, *k);
                if *v != before {
                    changed.push(v.name.clone());
                }
            }
            for v in graph.output.iter_mut() {
                // An output whose batch axis cannot be told keeps its dims.
                if let Ok(Some(k)) = axes.axis(&v.name) {
                    set_axis_dynamic(v, k);
                }
            }
            graph.value_info.clear();
            Ok(changed)
        }
    }
}

/// Axis `k` of `v` becomes the dynamic `batch` axis (nothing changes where `v` has no axis `k`).
fn set_axis_dynamic(v: &mut crate::onnx::pb::ValueInfoProto, k: usize) {
    let info = TensorInfo::from_value_info(v);
    if let Some(mut dims) = info.dims.filter(|d| d.len() > k) {
        dims[k] = Dim::Symbol(BATCH_SYMBOL.into());
        set_dims(v, &dims);
    }
}

/// The shape that fixes input `info`'s batch axis `k` (and every axis carrying its symbol) to
/// `n`, the other axes as declared.
fn static_shape(info: &TensorInfo, k: usize, n: i64) -> Result<InputShape> {
    let dims = info.dims.as_ref().context("checked above")?;
    if let Dim::Fixed(m) = dims[k] {
        if m != n {
            bail!(
                "input '{}' has a fixed batch of {m} ({}); it cannot run at batch {n} (re-export it with a dynamic batch axis)",
                info.name,
                format_dims(dims)
            );
        }
    }
    let symbol = match &dims[k] {
        Dim::Symbol(s) => Some(s.clone()),
        _ => None,
    };
    let mut spec: Vec<DimSpec> = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(m) => DimSpec::Fixed(*m),
            Dim::Symbol(s) if Some(s) == symbol.as_ref() => DimSpec::Fixed(n),
            _ => DimSpec::Dynamic,
        })
        .collect();
    spec[k] = DimSpec::Fixed(n);
    Ok(InputShape {
        name: Some(info.name.clone()),
        dims: spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::shape::test_support::{dims_of, model};

    #[test]
    fn fix_batch_pass_static_and_dynamic() {
        assert_eq!(FixBatch::new(Batch::Dynamic).name(), "fix-batch");
        let (m, report) = FixBatch::new(Batch::Static(4)).run(model(None)).unwrap();
        assert_eq!(
            report,
            PassReport::FixBatch {
                batch: Some(4),
                changed: vec!["input".into()]
            }
        );
        assert!(dims_of(&m, "input").starts_with("4×"));
        let (m, report) = FixBatch::new(Batch::Dynamic).run(m).unwrap();
        assert_eq!(
            report,
            PassReport::FixBatch {
                batch: None,
                changed: vec!["input".into()]
            }
        );
        assert!(dims_of(&m, "input").starts_with(BATCH_SYMBOL));
        assert!(dims_of(&m, "logits").starts_with(BATCH_SYMBOL));
        let err = FixBatch::new(Batch::Static(2))
            .run(model(Some(1)))
            .unwrap_err();
        assert!(err.to_string().contains("fixed batch of 1"), "{err}");
        assert!(FixBatch::new(Batch::Static(0)).run(model(None)).is_err());
    }
}
