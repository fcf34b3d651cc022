//! Input-shape overrides (`--input-shape` on the command line): parsing, validation against
//! the model, and the two passes on input declarations, [`InputShapes`] and [`FixBatch`].
//!
//! Accepted forms:
//! - `-1 3 224 224` or `1x3x224x224` — the shape of the model's only input (`-1`: dynamic);
//! - `input:1x3x224x224` (repeatable) — a shape per named input, for multi-input models.
//!
//! Beside them, a named (symbolic) axis can be given one size for every input that carries it
//! ([`NamedDim`], `seq=128`), or, for an engine profile, a `min:opt:max` range ([`DimRange`]).

use super::model::OnnxModel;
use super::rewrite::pass::{Pass, PassReport};
use super::tensor_info::{set_dims, TensorInfo};
use crate::tensor::{format_dims, Dim};
use anyhow::{bail, Context, Result};
use std::fmt;

/// The name given to a dynamic batch axis when trtkit has to invent one.
pub const BATCH_SYMBOL: &str = "batch";

/// One requested dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimSpec {
    /// `-1`: leave this axis dynamic.
    Dynamic,
    /// A fixed size.
    Fixed(i64),
}

impl fmt::Display for DimSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimSpec::Dynamic => write!(f, "-1"),
            DimSpec::Fixed(n) => write!(f, "{n}"),
        }
    }
}

/// A requested shape for one input (`name` is `None` for the unnamed form).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputShape {
    /// Input name, when given as `name:dims`.
    pub name: Option<String>,
    /// Requested dims.
    pub dims: Vec<DimSpec>,
}

impl fmt::Display for InputShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(DimSpec::to_string).collect();
        match &self.name {
            Some(n) => write!(f, "{n}:{}", dims.join("x")),
            None => write!(f, "{}", dims.join("x")),
        }
    }
}

fn parse_dim(token: &str) -> Result<DimSpec> {
    match token.trim().parse::<i64>() {
        Ok(-1) => Ok(DimSpec::Dynamic),
        Ok(n) if n > 0 => Ok(DimSpec::Fixed(n)),
        _ => bail!("'{token}' is not a dimension (a positive integer, or -1 for dynamic)"),
    }
}

fn parse_dims(text: &str) -> Result<Vec<DimSpec>> {
    if text.is_empty() {
        bail!("empty shape");
    }
    text.split(['x', 'X', ',']).map(parse_dim).collect()
}

/// Parses the values given to `--input-shape` (all occurrences, in order).
pub fn parse_input_shapes(tokens: &[String]) -> Result<Vec<InputShape>> {
    let parse = || -> Result<Vec<InputShape>> {
        if tokens.is_empty() {
            return Ok(vec![]);
        }
        if tokens.iter().any(|t| t.contains(':')) {
            return tokens
                .iter()
                .map(|t| {
                    let Some((name, dims)) = t.rsplit_once(':') else {
                        bail!("'{t}': mix of named (name:1x3x224x224) and unnamed shapes");
                    };
                    if name.is_empty() {
                        bail!("'{t}': the input name before ':' is empty");
                    }
                    Ok(InputShape {
                        name: Some(name.to_string()),
                        dims: parse_dims(dims)?,
                    })
                })
                .collect();
        }
        let dims = if tokens.len() == 1 {
            parse_dims(&tokens[0])?
        } else {
            tokens.iter().map(|t| parse_dim(t)).collect::<Result<_>>()?
        };
        Ok(vec![InputShape { name: None, dims }])
    };
    parse().with_context(|| format!("--input-shape {}", tokens.join(" ")))
}

/// One size for a named axis: every input axis declared with the symbol `symbol` gets `size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedDim {
    /// The axis's symbol in the model (`seq`, `sequence`, …).
    pub symbol: String,
    /// Its size.
    pub size: i64,
}

/// What a named axis is given on the command line (`seq=64,128` or `seq=16:128:512`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimValues {
    /// One size, or several to sweep.
    Sizes(Vec<i64>),
    /// The range of an engine profile: smallest, tuned-for and largest size.
    Range {
        /// Smallest size.
        min: i64,
        /// Size the kernels are tuned for.
        opt: i64,
        /// Largest size.
        max: i64,
    },
}

/// One `NAME=VALUES` dim setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimRange {
    /// The axis's symbol.
    pub symbol: String,
    /// Its sizes or range.
    pub values: DimValues,
}

fn parse_size(token: &str) -> Result<i64> {
    match token.trim().parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("'{token}' is not a size (a positive integer)"),
    }
}

/// Parses named-axis settings: `seq=128`, `seq=64,128,256` (sizes to sweep) or `seq=16:128:512`
/// (min:opt:max). A symbol given twice is refused.
pub fn parse_dim_ranges(tokens: &[String]) -> Result<Vec<DimRange>> {
    let mut out: Vec<DimRange> = Vec::new();
    for t in tokens {
        let parsed = (|| -> Result<DimRange> {
            let Some((symbol, values)) = t.split_once('=') else {
                bail!("expected NAME=SIZE, NAME=S1,S2,… or NAME=MIN:OPT:MAX");
            };
            let symbol = symbol.trim();
            if symbol.is_empty() {
                bail!("the axis name before '=' is empty");
            }
            let values = if values.contains(':') {
                let parts: Vec<i64> = values.split(':').map(parse_size).collect::<Result<_>>()?;
                let [min, opt, max] = parts[..] else {
                    bail!("a range is MIN:OPT:MAX, three sizes");
                };
                if !(min <= opt && opt <= max) {
                    bail!("needs min ≤ opt ≤ max");
                }
                DimValues::Range { min, opt, max }
            } else {
                DimValues::Sizes(values.split(',').map(parse_size).collect::<Result<_>>()?)
            };
            Ok(DimRange {
                symbol: symbol.to_string(),
                values,
            })
        })()
        .with_context(|| format!("dim '{t}'"))?;
        if out.iter().any(|d| d.symbol == parsed.symbol) {
            bail!("dim '{t}': axis '{}' is given twice", parsed.symbol);
        }
        out.push(parsed);
    }
    Ok(out)
}

/// Named axes to sweep, each with its sizes in order (`seq` → 64, 128, 256).
pub type DimSweep = Vec<(String, Vec<i64>)>;

/// Every combination of one size per axis, in order (the first axis varies slowest); one empty
/// combination when there are no axes.
pub fn dim_points(dims: &[(String, Vec<i64>)]) -> Vec<Vec<NamedDim>> {
    let mut points = vec![vec![]];
    for (symbol, sizes) in dims {
        points = points
            .into_iter()
            .flat_map(|p: Vec<NamedDim>| {
                sizes.iter().map(move |&size| {
                    let mut q = p.clone();
                    q.push(NamedDim {
                        symbol: symbol.clone(),
                        size,
                    });
                    q
                })
            })
            .collect();
    }
    points
}

/// The shapes asked of a model's inputs: per-input shapes and sizes of named axes, applied
/// together by [`InputShapes`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShapeRequest {
    /// Per-input shapes.
    pub shapes: Vec<InputShape>,
    /// Sizes of named axes.
    pub dims: Vec<NamedDim>,
}

impl ShapeRequest {
    /// Per-input shapes only.
    pub fn shapes(shapes: Vec<InputShape>) -> Self {
        ShapeRequest {
            shapes,
            dims: vec![],
        }
    }

    /// Whether nothing is asked.
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty() && self.dims.is_empty()
    }

    /// The same shapes with these named-axis sizes added.
    pub fn with_dims(&self, dims: &[NamedDim]) -> Self {
        let mut out = self.clone();
        out.dims.extend(dims.iter().cloned());
        out
    }
}

/// The symbols of the model's input axes, each once, in order of appearance.
pub fn input_symbols(model: &OnnxModel) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for info in model_inputs(model) {
        for d in info.dims.iter().flatten() {
            if let Dim::Symbol(s) = d {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
        }
    }
    out
}

/// A size given to a named axis that the model's inputs do not have, or that is their batch
/// axis.
#[derive(Debug, thiserror::Error)]
pub enum NamedAxisError {
    /// No input has the axis.
    #[error("no input has an axis named '{symbol}' ({known})")]
    Unknown {
        /// The name asked for.
        symbol: String,
        /// The names the inputs have, as a phrase.
        known: String,
    },
    /// The axis is axis 0, whose size is the batch size.
    #[error("axis '{symbol}' is the batch axis; its size is the batch size")]
    Batch {
        /// The name asked for.
        symbol: String,
    },
}

/// Checks that each named axis is a non-batch axis of some input; the error lists the names
/// the model has.
pub fn check_named_axes<'a>(
    model: &OnnxModel,
    symbols: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    let inputs = model_inputs(model);
    for symbol in symbols {
        let axes: Vec<usize> = inputs
            .iter()
            .filter_map(|i| i.dims.as_ref())
            .flat_map(|dims| {
                dims.iter()
                    .enumerate()
                    .filter(|(_, d)| matches!(d, Dim::Symbol(s) if s == symbol))
                    .map(|(axis, _)| axis)
            })
            .collect();
        if axes.is_empty() {
            let known = input_symbols(model);
            return Err(NamedAxisError::Unknown {
                symbol: symbol.to_string(),
                known: if known.is_empty() {
                    "the inputs have no named axes".to_string()
                } else {
                    format!("named axes: {}", known.join(", "))
                },
            }
            .into());
        }
        if axes.contains(&0) {
            return Err(NamedAxisError::Batch {
                symbol: symbol.to_string(),
            }
            .into());
        }
    }
    Ok(())
}

/// `request`'s shapes with its named-axis sizes written into them: a named shape per input that
/// carries one of the symbols (the request's own shape of that input, if any, completed).
fn expand_named_dims(model: &OnnxModel, request: &ShapeRequest) -> Result<Vec<InputShape>> {
    let mut shapes = request.shapes.clone();
    if request.dims.is_empty() {
        return Ok(shapes);
    }
    check_named_axes(model, request.dims.iter().map(|d| d.symbol.as_str()))?;
    let inputs = model_inputs(model);
    let size_of = |d: &Dim| match d {
        Dim::Symbol(s) => request.dims.iter().find(|n| &n.symbol == s),
        _ => None,
    };
    for info in &inputs {
        let Some(declared) = &info.dims else { continue };
        if !declared.iter().any(|d| size_of(d).is_some()) {
            continue;
        }
        let own = shapes.iter().position(|s| match &s.name {
            Some(n) => n == &info.name,
            None => inputs.len() == 1,
        });
        match own {
            // A rank mismatch is reported when the shape is checked against the model.
            Some(p) if shapes[p].dims.len() == declared.len() => {
                for (axis, d) in declared.iter().enumerate() {
                    let Some(named) = size_of(d) else { continue };
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
                    .map(|d| match (d, size_of(d)) {
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
        (DimSpec::Dynamic, _) => Dim::Symbol(format!("dim{axis}")),
    }
}

/// The real inputs of a model: graph inputs that are not initializers.
pub fn model_inputs(model: &OnnxModel) -> Vec<TensorInfo> {
    let graph = model.graph();
    let inits: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name.as_str()).collect();
    graph
        .input
        .iter()
        .filter(|v| !inits.contains(v.name.as_str()))
        .map(TensorInfo::from_value_info)
        .collect()
}

/// The batch every input of `model` is fixed to, if any.
pub fn fixed_batch(model: &OnnxModel) -> Option<usize> {
    let inputs = model_inputs(model);
    let mut sizes = inputs.iter().map(|i| match i.dims.as_ref()?.first()? {
        Dim::Fixed(n) => Some(*n as usize),
        _ => None,
    });
    let first = sizes.next()??;
    sizes.all(|s| s == Some(first)).then_some(first)
}

/// The outputs of a model.
pub fn model_outputs(model: &OnnxModel) -> Vec<TensorInfo> {
    model
        .graph()
        .output
        .iter()
        .map(TensorInfo::from_value_info)
        .collect()
}

/// The input-shapes pass: checks the shapes against the model and writes them into its input
/// declarations.
///
/// Symbols that become fixed (e.g. `batch` → 32) are substituted in outputs and value_info too.
/// An empty list changes nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputShapes(pub ShapeRequest);

impl Pass for InputShapes {
    fn name(&self) -> &'static str {
        "input-shapes"
    }

    fn run(&self, mut model: OnnxModel) -> Result<(OnnxModel, PassReport)> {
        let changed = apply_input_shapes(&mut model, &self.0)?;
        Ok((model, PassReport::InputShapes { changed }))
    }
}

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

/// Writes `shapes` into the input declarations; returns the inputs whose declaration changed.
fn apply_input_shapes(model: &mut OnnxModel, request: &ShapeRequest) -> Result<Vec<String>> {
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

fn substitute_symbols(v: &mut super::pb::ValueInfoProto, fixed: &[(String, i64)]) {
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

    fn toks(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_all_three_forms() {
        let s = parse_input_shapes(&toks("-1 3 224 224")).unwrap();
        assert_eq!(
            s[0].dims,
            vec![
                DimSpec::Dynamic,
                DimSpec::Fixed(3),
                DimSpec::Fixed(224),
                DimSpec::Fixed(224)
            ]
        );
        assert_eq!(s[0].name, None);
        let s = parse_input_shapes(&toks("32x3x224x224")).unwrap();
        assert_eq!(s[0].dims[0], DimSpec::Fixed(32));
        let s = parse_input_shapes(&toks("a:1x3 b:-1x4")).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].name.as_deref(), Some("b"));
        assert_eq!(s[1].dims, vec![DimSpec::Dynamic, DimSpec::Fixed(4)]);
        assert_eq!(s[1].to_string(), "b:-1x4");
    }

    fn model(batch: Option<i64>) -> OnnxModel {
        OnnxModel::from_proto(crate::onnx::test_models::classifier(batch), "c.onnx")
    }

    fn dims_of(m: &OnnxModel, name: &str) -> String {
        let all = model_inputs(m).into_iter().chain(model_outputs(m));
        all.filter(|i| i.name == name)
            .map(|i| i.shape_string())
            .next()
            .unwrap()
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

    #[test]
    fn rejects_bad_dims() {
        for bad in ["0 3", "-2 3", "a 3", "x:", ":1x3", "1x3 x:4"] {
            let err = parse_input_shapes(&toks(bad)).unwrap_err();
            assert!(
                format!("{err:#}").contains("--input-shape"),
                "{bad}: {err:#}"
            );
        }
    }
}
