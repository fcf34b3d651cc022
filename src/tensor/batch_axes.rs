//! Which axis of each input and output holds the samples of a batch: axis 0 of an image, axis 1
//! of a recurrent state `[layers, N, hidden]`, none of a scalar sample rate. Found from the named
//! axes the inputs share, or given by hand (`NAME=K`, `NAME=none`); the one place every slicer,
//! joiner and input maker asks.

use super::{format_dims, Dim};
use std::fmt;

/// One batch axis given by hand: `NAME=K`, or `NAME=none` for a tensor that holds no samples.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchAxisChoice {
    /// The input or output.
    pub name: String,
    /// Its batch axis; `None`: it has none (fed as given, the same for every sample).
    pub axis: Option<usize>,
}

impl std::str::FromStr for BatchAxisChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("batch axis '{s}': expected NAME=K (an axis index) or NAME=none");
        let (name, value) = s.rsplit_once('=').ok_or_else(bad)?;
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() {
            return Err(bad());
        }
        let axis = match value {
            "none" => None,
            k => Some(k.parse::<usize>().map_err(|_| bad())?),
        };
        Ok(BatchAxisChoice {
            name: name.to_string(),
            axis,
        })
    }
}

/// The batch axes given by hand, over what the model's dims say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchAxisRequest(pub Vec<BatchAxisChoice>);

impl BatchAxisRequest {
    /// The axis given for `name` (the last one given wins): `Some(None)` when it was given as
    /// having none, `None` when nothing was given for it.
    pub fn get(&self, name: &str) -> Option<Option<usize>> {
        self.0.iter().rev().find(|c| c.name == name).map(|c| c.axis)
    }
}

/// Where one tensor's samples lie.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Axis {
    /// On this axis.
    At(usize),
    /// Nowhere: the tensor is the same for every sample.
    NoBatch,
    /// Cannot be told; why not.
    Undecided(String),
}

/// A tensor whose batch axis cannot be told, or a batch axis given by hand that does not fit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchAxisError {
    /// The dims do not say which axis holds the samples.
    #[error("{kind} '{name}' ({dims}): {why}, so its batch axis cannot be told; give it with --batch-axis {name}=K (or {name}=none when it is the same for every sample)")]
    Undecided {
        /// `input` or `output`.
        kind: &'static str,
        /// The tensor.
        name: String,
        /// Its declared dims, as text.
        dims: String,
        /// Why the dims do not tell.
        why: String,
    },
    /// `--batch-axis` names a tensor the model does not have.
    #[error("--batch-axis {name}=…: the model has no input or output '{name}' (it has: {known})")]
    UnknownName {
        /// The name given.
        name: String,
        /// The names the model has.
        known: String,
    },
    /// `--batch-axis` gives an axis past the tensor's rank.
    #[error("--batch-axis {name}={axis}: '{name}' has rank {rank} ({dims})")]
    PastRank {
        /// The tensor.
        name: String,
        /// The axis given.
        axis: usize,
        /// Its rank.
        rank: usize,
        /// Its dims, as text.
        dims: String,
    },
}

/// The name and declared dims (`None`: not declared) of one input or output, as the inference
/// reads them.
#[derive(Clone, Copy, Debug)]
pub struct Declared<'a> {
    /// The tensor's name.
    pub name: &'a str,
    /// Its dims, when declared.
    pub dims: Option<&'a [Dim]>,
}

/// The batch axis of every input and output of a model. A tensor it does not list (an
/// activation captured later, a backend that declares none) is batched on axis 0, as trtkit has
/// always assumed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchAxes {
    inputs: Vec<(String, Axis)>,
    outputs: Vec<(String, Axis)>,
    /// Every tensor's declared dims as text, for the errors of undecided axes.
    dims: Vec<(String, String)>,
}

/// How the inputs carry their batch.
enum Mode {
    /// A symbol the inputs share (`N`, `batch`).
    Named(String),
    /// An unnamed dynamic axis 0.
    Anonymous,
    /// Every axis 0 fixed (a static model).
    Static,
}

/// Whether `d` is a dynamic axis without a usable name (ONNX Runtime reports unnamed ones as `?`).
fn anonymous(d: &Dim) -> bool {
    match d {
        Dim::Unknown => true,
        Dim::Symbol(s) => s.is_empty() || s == "?",
        Dim::Fixed(_) => false,
    }
}

fn named(d: &Dim) -> Option<&str> {
    match d {
        Dim::Symbol(s) if !anonymous(d) => Some(s),
        _ => None,
    }
}

/// The symbol that marks the batch: of the symbols on axis 0 of the inputs (or on the axis given
/// by hand), the one the most inputs carry on any axis (the first on a tie).
fn mode(inputs: &[Declared], request: &BatchAxisRequest) -> Mode {
    let mut candidates: Vec<&str> = vec![];
    let mut any_anonymous = false;
    for i in inputs {
        let Some(dims) = i.dims else { continue };
        let axis = match request.get(i.name) {
            Some(Some(k)) => k,
            Some(None) => continue,
            None => 0,
        };
        match dims.get(axis) {
            Some(d) if named(d).is_some() => candidates.extend(named(d)),
            Some(d) if anonymous(d) => any_anonymous = true,
            _ => {}
        }
    }
    let carriers = |s: &str| {
        inputs
            .iter()
            .filter(|i| {
                i.dims
                    .is_some_and(|d| d.iter().any(|d| named(d) == Some(s)))
            })
            .count()
    };
    let mut best: Option<(&str, usize)> = None;
    for s in candidates {
        let n = carriers(s);
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((s, n));
        }
    }
    match best {
        Some((s, _)) => Mode::Named(s.to_string()),
        None if any_anonymous => Mode::Anonymous,
        None => Mode::Static,
    }
}

/// The batch axis of an input from its dims alone.
fn input_axis(dims: Option<&[Dim]>, mode: &Mode) -> Axis {
    let Some(dims) = dims else {
        return Axis::At(0);
    };
    if dims.is_empty() {
        return Axis::NoBatch;
    }
    let all_fixed = dims.iter().all(|d| matches!(d, Dim::Fixed(_)));
    let first_dynamic = !matches!(dims[0], Dim::Fixed(_));
    match mode {
        Mode::Named(s) => match dims.iter().position(|d| named(d) == Some(s)) {
            Some(k) => Axis::At(k),
            None if all_fixed => Axis::NoBatch,
            None if first_dynamic => Axis::At(0),
            None => Axis::Undecided(format!(
                "its axis 0 is fixed and none of its axes is the batch axis '{s}' the other inputs share"
            )),
        },
        Mode::Anonymous if all_fixed => Axis::NoBatch,
        Mode::Anonymous if !first_dynamic => Axis::Undecided(
            "its axis 0 is fixed and its dynamic axes carry no name the other inputs share".into(),
        ),
        // Fixed everywhere (a static model) or an unnamed dynamic axis 0.
        Mode::Static | Mode::Anonymous => Axis::At(0),
    }
}

/// The batch axis of an output from its dims, given how the inputs are batched.
fn output_axis(dims: Option<&[Dim]>, mode: &Mode, inputs_on_0: bool) -> Axis {
    if dims.is_some_and(<[Dim]>::is_empty) {
        return Axis::NoBatch;
    }
    if let (Mode::Named(s), Some(dims)) = (mode, dims) {
        if let Some(k) = dims.iter().position(|d| named(d) == Some(s)) {
            return Axis::At(k);
        }
    }
    if inputs_on_0 {
        return Axis::At(0);
    }
    Axis::Undecided(match mode {
        Mode::Named(s) => {
            format!("it carries no batch axis '{s}' and the inputs are not all batched on axis 0")
        }
        _ => "its axes carry no name and the inputs are not all batched on axis 0".into(),
    })
}

fn shown(dims: Option<&[Dim]>) -> String {
    match dims {
        Some([]) => "a scalar".into(),
        Some(d) => format_dims(d),
        None => "no declared shape".into(),
    }
}

impl BatchAxes {
    /// The batch axes of a model from its declared inputs and outputs, `request` over them.
    ///
    /// The batch symbol is the symbol on axis 0 of the inputs that the most inputs carry; an
    /// input carrying it on axis k is batched on k, one that carries none and has every axis
    /// fixed (or is a scalar) has no batch axis. Outputs: the axis carrying the symbol, else axis
    /// 0 when every batched input is batched on 0. With no symbol at all, an unnamed dynamic axis
    /// 0 is the batch; a model fixed everywhere is batched on axis 0. A tensor whose axis cannot
    /// be told is an error once something needs its axis ([`BatchAxes::axis`]); a name or axis
    /// in `request` that does not fit the model is an error at once.
    pub(crate) fn infer(
        inputs: &[Declared],
        outputs: &[Declared],
        request: &BatchAxisRequest,
    ) -> Result<BatchAxes, BatchAxisError> {
        let all = inputs.iter().chain(outputs);
        for c in &request.0 {
            let Some(t) = all.clone().find(|t| t.name == c.name) else {
                let known: Vec<&str> = all.clone().map(|t| t.name).collect();
                return Err(BatchAxisError::UnknownName {
                    name: c.name.clone(),
                    known: known.join(", "),
                });
            };
            if let (Some(axis), Some(dims)) = (c.axis, t.dims) {
                if axis >= dims.len() {
                    return Err(BatchAxisError::PastRank {
                        name: c.name.clone(),
                        axis,
                        rank: dims.len(),
                        dims: shown(Some(dims)),
                    });
                }
            }
        }
        let mode = mode(inputs, request);
        let given = |t: &Declared| {
            request.get(t.name).map(|a| match a {
                Some(k) => Axis::At(k),
                None => Axis::NoBatch,
            })
        };
        let mut axes = BatchAxes::default();
        for i in inputs {
            let axis = given(i).unwrap_or_else(|| input_axis(i.dims, &mode));
            axes.dims.push((i.name.to_string(), shown(i.dims)));
            axes.inputs.push((i.name.to_string(), axis));
        }
        let on_0 = axes
            .inputs
            .iter()
            .all(|(_, a)| matches!(a, Axis::At(0) | Axis::NoBatch));
        for o in outputs {
            let axis = given(o).unwrap_or_else(|| output_axis(o.dims, &mode, on_0));
            axes.dims.push((o.name.to_string(), shown(o.dims)));
            axes.outputs.push((o.name.to_string(), axis));
        }
        Ok(axes)
    }

    /// The batch axis of the input or output `name` (`None`: it has none); axis 0 for a tensor
    /// not listed. An output whose axis cannot be told is an error naming the flag that gives it.
    pub fn axis(&self, name: &str) -> Result<Option<usize>, BatchAxisError> {
        let listed = self
            .inputs
            .iter()
            .find(|(n, _)| n == name)
            .map(|p| ("input", p));
        let listed = listed.or_else(|| {
            self.outputs
                .iter()
                .find(|(n, _)| n == name)
                .map(|p| ("output", p))
        });
        match listed {
            None => Ok(Some(0)),
            Some((_, (_, Axis::At(k)))) => Ok(Some(*k)),
            Some((_, (_, Axis::NoBatch))) => Ok(None),
            Some((kind, (_, Axis::Undecided(why)))) => Err(BatchAxisError::Undecided {
                kind,
                name: name.to_string(),
                dims: self
                    .dims
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, d)| d.clone())
                    .unwrap_or_default(),
                why: why.clone(),
            }),
        }
    }

    /// The inputs that have no batch axis, in order.
    pub(crate) fn unbatched_inputs(&self) -> Vec<&str> {
        self.inputs
            .iter()
            .filter(|(_, a)| *a == Axis::NoBatch)
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// The inputs and outputs whose batch axis cannot be told, in order.
    pub(crate) fn undecided(&self) -> Vec<&str> {
        self.inputs
            .iter()
            .chain(&self.outputs)
            .filter(|(_, a)| matches!(a, Axis::Undecided(_)))
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// Whether every listed input and output is batched on axis 0 (or has no batch axis).
    pub(crate) fn all_on_axis_0(&self) -> bool {
        self.inputs
            .iter()
            .chain(&self.outputs)
            .all(|(_, a)| matches!(a, Axis::At(0) | Axis::NoBatch))
    }

    /// One note line per input with no batch axis, as reports print them.
    pub fn notes(&self) -> Vec<String> {
        self.unbatched_inputs()
            .into_iter()
            .map(|n| {
                format!("input '{n}' has no batch axis: fed as given, the same for every sample")
            })
            .collect()
    }
}

impl fmt::Display for BatchAxes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let said: Vec<String> = self
            .inputs
            .iter()
            .chain(&self.outputs)
            .map(|(n, a)| match a {
                Axis::At(k) => format!("{n}={k}"),
                Axis::NoBatch => format!("{n}=none"),
                Axis::Undecided(_) => format!("{n}=?"),
            })
            .collect();
        f.write_str(&said.join(" "))
    }
}

#[cfg(test)]
mod tests;
