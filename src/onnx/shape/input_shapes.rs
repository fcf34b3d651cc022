//! The input-shapes pass, [`InputShapes`]: a [`ShapeRequest`] checked against the model and
//! written into its input declarations, named-axis sizes reaching every input that carries the
//! axis, and symbols that become fixed substituted in outputs and value_info.

use super::axis_ref::{resolve_axis, AxisTarget};
use super::queries::model_inputs;
use super::request::{DimSpec, InputShape, NamedDim, ShapeRequest, BATCH_SYMBOL};
use crate::onnx::model::OnnxModel;
use crate::onnx::rewrite::pass::Pass;
use crate::onnx::rewrite::pass::PassReport;
use crate::onnx::tensor_info::{set_dims, TensorInfo};
use crate::tensor::Dim;
use anyhow::{bail, Context, Result};

/// The input-shapes pass: checks the shapes against the model and writes them into its input
/// declarations.
///
/// Symbols that become fixed (e.g. `batch` → 32) are substituted in outputs and value_info too.
/// An empty list changes nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct InputShapes(pub ShapeRequest);

impl Pass for InputShapes {
    fn name(&self) -> &'static str {
        "input-shapes"
    }

    fn run(&self, mut model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let changed = apply_input_shapes(&mut model, &self.0)?;
        Ok((model, PassReport::InputShapes { changed }))
    }
}

/// Writes `shapes` into the input declarations; returns the inputs whose declaration changed.
pub(super) fn apply_input_shapes(
    model: &mut OnnxModel,
    request: &ShapeRequest,
) -> Result<Vec<String>> {
    let shapes = expand_named_dims(model, request)?;
    let resolved = resolve_shapes(model, &shapes)?;
    let inputs = model_inputs(model);
    let mut fixed_symbols: Vec<(String, i64)> = Vec::new();
    for (index, dims) in &resolved {
        if let Some(declared) = &inputs[*index].dims {
            for (d, new) in declared.iter().zip(dims) {
                if let (Dim::Symbol(s), Dim::Fixed(n)) = (d, new) {
                    if let Some((_, prev)) = fixed_symbols.iter().find(|(name, _)| name == s) {
                        if prev != n {
                            bail!("shape symbol '{s}' is given both {prev} and {n}");
                        }
                    } else {
                        fixed_symbols.push((s.clone(), *n));
                    }
                }
            }
        }
    }
    let graph = model.graph_mut();
    let mut changed = Vec::new();
    for (index, dims) in resolved {
        let name = inputs[index].name.clone();
        let v = graph
            .input
            .iter_mut()
            .find(|v| v.name == name)
            .expect("input exists");
        let before = v.clone();
        set_dims(v, &dims);
        if *v != before {
            changed.push(name);
        }
    }
    for v in graph.output.iter_mut().chain(graph.value_info.iter_mut()) {
        substitute_symbols(v, &fixed_symbols);
    }
    Ok(changed)
}

/// Replaces the symbols of `v` that `fixed` gives a size with that size.
fn substitute_symbols(v: &mut crate::onnx::pb::ValueInfoProto, fixed: &[(String, i64)]) {
    let info = TensorInfo::from_value_info(v);
    let Some(dims) = info.dims else { return };
    let new: Vec<Dim> = dims
        .into_iter()
        .map(|d| match &d {
            Dim::Symbol(s) => fixed
                .iter()
                .find(|(n, _)| n == s)
                .map(|(_, v)| Dim::Fixed(*v))
                .unwrap_or(d),
            _ => d,
        })
        .collect();
    set_dims(v, &new);
}

/// `request`'s shapes with its named-axis sizes written into them: a named shape per input that
/// carries one of the symbols (the request's own shape of that input, if any, completed).
fn expand_named_dims(model: &OnnxModel, request: &ShapeRequest) -> Result<Vec<InputShape>> {
    let mut shapes = request.shapes.clone();
    if request.dims.is_empty() {
        return Ok(shapes);
    }
    let inputs = model_inputs(model);
    let mut targets: Vec<(AxisTarget, &NamedDim)> = vec![];
    for named in &request.dims {
        let target = resolve_axis(&inputs, &named.symbol)?;
        if let Some((_, other)) = targets.iter().find(|(t, _)| *t == target) {
            if other.size != named.size {
                bail!(
                    "'{}' and '{}' are the same axis, given {} and {}",
                    other.symbol,
                    named.symbol,
                    other.size,
                    named.size
                );
            }
        }
        targets.push((target, named));
    }
    let size_of = |input: &str, axis: usize, d: &Dim| {
        targets
            .iter()
            .find(|(t, _)| t.matches(input, axis, d))
            .map(|(_, named)| *named)
    };
    for info in &inputs {
        let Some(declared) = &info.dims else { continue };
        let size_at = |axis: usize| size_of(&info.name, axis, &declared[axis]);
        if !(0..declared.len()).any(|axis| size_at(axis).is_some()) {
            continue;
        }
        let own = shapes.iter().position(|s| match &s.name {
            Some(n) => n == &info.name,
            None => inputs.len() == 1,
        });
        match own {
            // A rank mismatch is reported when the shape is checked against the model.
            Some(p) if shapes[p].dims.len() == declared.len() => {
                for axis in 0..declared.len() {
                    let Some(named) = size_at(axis) else { continue };
                    match shapes[p].dims[axis] {
                        DimSpec::Dynamic => shapes[p].dims[axis] = DimSpec::Fixed(named.size),
                        DimSpec::Fixed(n) if n != named.size => bail!(
                            "input '{}': its shape sets axis {axis} ('{}') to {n}, its named size is {}",
                            info.name,
                            named.symbol,
                            named.size
                        ),
                        DimSpec::Fixed(_) => {}
                    }
                }
            }
            Some(_) => {}
            None => shapes.push(InputShape {
                name: Some(info.name.clone()),
                dims: declared
                    .iter()
                    .enumerate()
                    .map(|(axis, d)| match (d, size_at(axis)) {
                        (Dim::Fixed(n), _) => DimSpec::Fixed(*n),
                        (_, Some(named)) => DimSpec::Fixed(named.size),
                        _ => DimSpec::Dynamic,
                    })
                    .collect(),
            }),
        }
    }
    Ok(shapes)
}

/// Checks requested shapes against the model; returns (input index, dims to set) pairs.
fn resolve_shapes(model: &OnnxModel, shapes: &[InputShape]) -> Result<Vec<(usize, Vec<Dim>)>> {
    let inputs = model_inputs(model);
    let mut out = Vec::new();
    for shape in shapes {
        let index = match &shape.name {
            Some(name) => inputs
                .iter()
                .position(|i| &i.name == name)
                .with_context(|| {
                    let names: Vec<_> = inputs.iter().map(|i| i.name.as_str()).collect();
                    format!(
                        "input shape {shape}: the model has no input '{name}' (inputs: {})",
                        names.join(", ")
                    )
                })?,
            None if inputs.len() == 1 => 0,
            None => {
                let names: Vec<_> = inputs.iter().map(|i| format!("{}:…", i.name)).collect();
                bail!(
                    "input shape {shape}: the model has {} inputs; name each one ({})",
                    inputs.len(),
                    names.join(" ")
                );
            }
        };
        if out.iter().any(|(i, _)| *i == index) {
            bail!("input '{}' is given two shapes", inputs[index].name);
        }
        let info = &inputs[index];
        out.push((index, merge_dims(info, shape)?));
    }
    Ok(out)
}

/// Combines a requested shape with the model's declared one, refusing disagreements.
fn merge_dims(info: &TensorInfo, shape: &InputShape) -> Result<Vec<Dim>> {
    let requested: Vec<String> = shape.dims.iter().map(DimSpec::to_string).collect();
    let mismatch = |why: String| {
        anyhow::anyhow!(
            "input '{}': requested shape {} but the model declares {}: {why}",
            info.name,
            requested.join("×"),
            info.shape_string()
        )
    };
    let Some(model_dims) = &info.dims else {
        // The model declares no shape: take the request as it is.
        return Ok(shape
            .dims
            .iter()
            .enumerate()
            .map(|(axis, d)| spec_to_dim(*d, axis, None))
            .collect());
    };
    if model_dims.len() != shape.dims.len() {
        return Err(mismatch(format!(
            "rank {} vs rank {}",
            shape.dims.len(),
            model_dims.len()
        )));
    }
    let mut dims = Vec::with_capacity(model_dims.len());
    for (axis, (spec, declared)) in shape.dims.iter().zip(model_dims).enumerate() {
        match (spec, declared) {
            (DimSpec::Fixed(n), Dim::Fixed(m)) if n != m => {
                return Err(mismatch(format!(
                    "axis {axis} is fixed to {m} in the model"
                )));
            }
            (DimSpec::Dynamic, Dim::Fixed(m)) => {
                return Err(mismatch(format!(
                    "axis {axis} is fixed to {m} in the model and cannot be made dynamic (re-export with a dynamic axis)"
                )));
            }
            _ => dims.push(spec_to_dim(*spec, axis, Some(declared))),
        }
    }
    Ok(dims)
}

fn spec_to_dim(spec: DimSpec, axis: usize, declared: Option<&Dim>) -> Dim {
    match (spec, declared) {
        (DimSpec::Fixed(n), _) => Dim::Fixed(n),
        (DimSpec::Dynamic, Some(d @ Dim::Symbol(_))) => d.clone(),
        (DimSpec::Dynamic, _) if axis == 0 => Dim::Symbol(BATCH_SYMBOL.into()),
        // An axis the model leaves unnamed stays unnamed: a name trtkit made up here would be
        // one no flag could give (`--dim INPUT:AXIS=SIZE` reaches it).
        (DimSpec::Dynamic, _) => Dim::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::shape::parse_input_shapes;
    use crate::onnx::shape::test_support::{dims_of, model};
    use crate::onnx::shape::{dim_points, NamedDim};

    fn toks(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn input_shapes_pass_fixes_symbols_everywhere() {
        let shapes = InputShapes(ShapeRequest::shapes(
            parse_input_shapes(&toks("8x3x16x16")).unwrap(),
        ));
        assert_eq!(shapes.name(), "input-shapes");
        let (m, report) = shapes.run(model(None)).unwrap();
        assert_eq!(
            report,
            PassReport::InputShapes {
                changed: vec!["input".into()]
            }
        );
        assert_eq!(dims_of(&m, "input"), "8×3×16×16");
        assert_eq!(dims_of(&m, "logits").split('×').next(), Some("8"));
        // Running it again changes nothing; an empty list changes nothing either.
        let (m, report) = shapes.run(m).unwrap();
        assert_eq!(report, PassReport::InputShapes { changed: vec![] });
        let (_, report) = InputShapes::default().run(m).unwrap();
        assert_eq!(report, PassReport::InputShapes { changed: vec![] });
    }

    #[test]
    fn input_shapes_pass_refuses_what_the_model_contradicts() {
        for (bad, needle) in [
            ("8x3x16", "rank"),
            ("8x4x16x16", "axis 1 is fixed to 3"),
            ("nope:8x3x16x16", "no input 'nope'"),
            ("input:1x3x16x16 input:2x3x16x16", "given two shapes"),
        ] {
            let shapes = InputShapes(ShapeRequest::shapes(
                parse_input_shapes(&toks(bad)).unwrap(),
            ));
            let err = format!("{:#}", shapes.run(model(None)).unwrap_err());
            assert!(err.contains(needle), "{bad}: {err}");
            assert!(
                !err.contains("--"),
                "{bad}: a library message names no flag: {err}"
            );
        }
    }

    #[test]
    fn a_named_size_reaches_every_input_that_carries_the_axis() {
        let tokens =
            || OnnxModel::from_proto(crate::onnx::test_models::token_classifier(), "t.onnx");
        let seq = |size| NamedDim {
            symbol: "seq".into(),
            size,
        };
        let request = ShapeRequest::default().with_dims(&[seq(24)]);
        let (m, _) = InputShapes(request.clone()).run(tokens()).unwrap();
        assert_eq!(dims_of(&m, "input_ids"), "batch×24");
        assert_eq!(dims_of(&m, "attention_mask"), "batch×24");
        // With a shape of one input: its dynamic axis is completed, a different size refused.
        let own = ShapeRequest {
            shapes: parse_input_shapes(&toks("input_ids:2x-1")).unwrap(),
            dims: vec![seq(24)],
        };
        let (m, _) = InputShapes(own).run(tokens()).unwrap();
        assert_eq!(dims_of(&m, "input_ids"), "2×24");
        assert_eq!(dims_of(&m, "attention_mask"), "batch×24");
        let clash = ShapeRequest {
            shapes: parse_input_shapes(&toks("input_ids:2x8")).unwrap(),
            dims: vec![seq(24)],
        };
        let err = format!("{:#}", InputShapes(clash).run(tokens()).unwrap_err());
        assert!(err.contains("axis 1 ('seq') to 8"), "{err}");
        for (symbol, needle) in [("len", "named axes: batch, seq"), ("batch", "batch axis")] {
            let r = ShapeRequest::default().with_dims(&[NamedDim {
                symbol: symbol.into(),
                size: 4,
            }]);
            let err = format!("{:#}", InputShapes(r).run(tokens()).unwrap_err());
            assert!(err.contains(needle) && !err.contains("--"), "{err}");
        }
        assert_eq!(
            dim_points(&[("a".into(), vec![1, 2]), ("b".into(), vec![3])])
                .iter()
                .map(|p| p.iter().map(|d| d.size).collect::<Vec<_>>())
                .collect::<Vec<_>>(),
            [vec![1, 3], vec![2, 3]]
        );
        assert_eq!(dim_points(&[]), [Vec::<NamedDim>::new()]);
    }
}
