//! The optimization profile of a build: min/opt/max dims per input, from trtkit's shape flags
//! (`--input-shape` with `-1`, `--min-batch/--opt-batch/--max-batch`) or trtexec's
//! (`--min-shapes/--opt-shapes/--max-shapes name:1x3x224x224`), checked against the model.

use crate::error::{fix_with, Setting};
use crate::onnx::shape::{resolve_axis, AxisTarget, NamedShape};
use crate::onnx::tensor_info::TensorInfo;
use crate::tensor::Dim;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// Batch range used for a dynamic batch axis when no flag says otherwise.
pub(crate) const DEFAULT_BATCH: BatchRange = BatchRange {
    min: 1,
    opt: 32,
    max: 64,
};

/// min/opt/max of a dynamic batch axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchRange {
    /// Smallest batch the engine accepts.
    pub min: i64,
    /// Batch the kernels are tuned for.
    pub opt: i64,
    /// Largest batch the engine accepts.
    pub max: i64,
}

/// What the user gave for the batch range; unset fields follow [`DEFAULT_BATCH`], with opt
/// and max kept consistent with what was given (`--max-batch 8` alone gives opt 8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchRequest {
    /// `--min-batch`.
    pub min: Option<i64>,
    /// `--opt-batch`.
    pub opt: Option<i64>,
    /// `--max-batch`.
    pub max: Option<i64>,
}

impl BatchRequest {
    /// Whether any of the three was given.
    pub(crate) fn is_set(&self) -> bool {
        self.min.is_some() || self.opt.is_some() || self.max.is_some()
    }

    /// The range, checked (positive, min ≤ opt ≤ max). What was given is checked before the
    /// defaults fill the rest, so no combination of flags makes a range the defaults cannot fit.
    pub(crate) fn resolve(&self) -> Result<BatchRange> {
        for (which, v) in [("min", self.min), ("opt", self.opt), ("max", self.max)] {
            if let Some(v) = v.filter(|&v| v < 1) {
                return Err(fix_with(
                    Setting::BatchRange,
                    format!("{which} batch {v}: a batch size must be at least 1"),
                ));
            }
        }
        if let (Some(min), Some(max)) = (self.min, self.max) {
            if min > max {
                return Err(fix_with(
                    Setting::BatchRange,
                    format!("batch profile min {min}, max {max}: needs min ≤ max"),
                ));
            }
        }
        let min = self.min.unwrap_or(DEFAULT_BATCH.min);
        let max = self
            .max
            .unwrap_or_else(|| DEFAULT_BATCH.max.max(self.opt.unwrap_or(0)).max(min));
        let opt = self
            .opt
            .unwrap_or_else(|| DEFAULT_BATCH.opt.clamp(min, max));
        if !(min <= opt && opt <= max) {
            return Err(fix_with(
                Setting::BatchRange,
                format!("batch profile min {min}, opt {opt}, max {max}: needs min ≤ opt ≤ max"),
            ));
        }
        Ok(BatchRange { min, opt, max })
    }
}

/// Dims as `1×3×224×224`, a dynamic axis (negative) as `?`.
pub(crate) fn format_shape(dims: &[i64]) -> String {
    dims.iter()
        .map(|v| {
            if *v < 0 {
                "?".to_string()
            } else {
                v.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("×")
}

/// trtexec-style explicit shapes for the profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExplicitShapes {
    /// `--min-shapes`.
    pub min: Vec<NamedShape>,
    /// `--opt-shapes`.
    pub opt: Vec<NamedShape>,
    /// `--max-shapes`.
    pub max: Vec<NamedShape>,
    /// Ranges of named axes (`seq` → 16:128:512), for every input that carries the axis and
    /// has no explicit shapes.
    pub axes: Vec<AxisRange>,
}

/// min/opt/max of a named (symbolic) axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisRange {
    /// The axis: its symbol in the model, or `INPUT:AXIS`.
    pub(crate) symbol: String,
    /// Its smallest, tuned-for and largest size.
    pub range: BatchRange,
}

impl ExplicitShapes {
    /// Whether any was given.
    pub(crate) fn is_set(&self) -> bool {
        !(self.min.is_empty() && self.opt.is_empty() && self.max.is_empty() && self.axes.is_empty())
    }

    /// Checks the shapes given for each input among themselves, before any model is read: an
    /// input named in one is named in all three, with the same rank in each and min ≤ opt ≤ max
    /// on every axis.
    pub(crate) fn check_ranges(&self) -> Result<()> {
        for named in self.min.iter().chain(&self.opt).chain(&self.max) {
            let name = &named.name;
            let [Some(min), Some(opt), Some(max)] =
                [&self.min, &self.opt, &self.max].map(|l| find(l, name))
            else {
                return Err(fix_with(
                    Setting::ShapeRanges,
                    format!(
                        "input '{name}': give all three of its min, opt and max shapes, or none"
                    ),
                ));
            };
            let ranks = [min.dims.len(), opt.dims.len(), max.dims.len()];
            if ranks.iter().any(|r| *r != ranks[0]) {
                return Err(fix_with(
                    Setting::ShapeRanges,
                    format!(
                        "profile of input '{name}': min, opt and max have ranks {}, {} and {}; they need the same rank",
                        ranks[0], ranks[1], ranks[2]
                    ),
                ));
            }
            check_order(name, &min.dims, &opt.dims, &max.dims)?;
        }
        Ok(())
    }
}

/// min/opt/max dims of one engine input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputProfile {
    /// Input name.
    pub name: String,
    /// Smallest shape.
    pub min: Vec<i64>,
    /// Shape the kernels are tuned for.
    pub opt: Vec<i64>,
    /// Largest shape.
    pub max: Vec<i64>,
}

impl InputProfile {
    /// Whether the input has one shape only.
    pub(crate) fn is_static(&self) -> bool {
        self.min == self.opt && self.opt == self.max
    }
}

/// The one optimization profile of an engine, an entry per model input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShapeProfile {
    /// Per input, in the model's order.
    pub inputs: Vec<InputProfile>,
}

impl ShapeProfile {
    /// Whether every input has one shape only.
    pub(crate) fn is_static(&self) -> bool {
        self.inputs.iter().all(InputProfile::is_static)
    }

    /// The batch range, when every input varies (if at all) on axis 0 only, with the same
    /// range: the common case, named `b1_32_64` (or `b32` when static) in engine file names.
    pub(crate) fn batch_range(&self) -> Option<BatchRange> {
        let first = self.inputs.first()?;
        let range = BatchRange {
            min: *first.min.first()?,
            opt: *first.opt.first()?,
            max: *first.max.first()?,
        };
        self.inputs
            .iter()
            .all(|i| {
                !i.min.is_empty()
                    && (i.min[0], i.opt[0], i.max[0]) == (range.min, range.opt, range.max)
                    && i.min[1..] == i.opt[1..]
                    && i.opt[1..] == i.max[1..]
            })
            .then_some(range)
    }

    /// The part of an engine file name that says which shapes it takes: `b1_32_64`, `b32`, or
    /// `p` and a hash of the whole profile when the inputs vary beyond the batch axis.
    pub(crate) fn file_tag(&self) -> String {
        match self.batch_range() {
            Some(r) if r.min == r.max => format!("b{}", r.min),
            Some(r) => format!("b{}_{}_{}", r.min, r.opt, r.max),
            None => self.hash_tag(),
        }
    }

    /// `p` and the first 8 hex digits of the SHA-256 of the whole profile.
    pub(crate) fn hash_tag(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        format!("p{}", &crate::digest::sha256_hex(text.as_bytes())[..8])
    }

    /// One line per input: `input  1×3×224×224 … 64×3×224×224 (opt 32×3×224×224)`.
    pub fn describe(&self) -> Vec<String> {
        let dims = format_shape;
        self.inputs
            .iter()
            .map(|i| {
                if i.is_static() {
                    format!("{}  {} (static)", i.name, dims(&i.min))
                } else {
                    format!(
                        "{}  min {}, opt {}, max {}",
                        i.name,
                        dims(&i.min),
                        dims(&i.opt),
                        dims(&i.max)
                    )
                }
            })
            .collect()
    }
}

fn find<'a>(shapes: &'a [NamedShape], name: &str) -> Option<&'a NamedShape> {
    shapes.iter().find(|s| s.name == name)
}

/// Checks min ≤ opt ≤ max on every axis of the explicit shapes of input `name` (of one rank).
fn check_order(name: &str, min: &[i64], opt: &[i64], max: &[i64]) -> Result<()> {
    for (axis, ((a, b), c)) in min.iter().zip(opt).zip(max).enumerate() {
        if !(a <= b && b <= c) {
            return Err(fix_with(
                Setting::ShapeRanges,
                format!(
                    "profile of input '{name}' axis {axis}: min {a}, opt {b}, max {c}; needs min ≤ opt ≤ max"
                ),
            ));
        }
    }
    Ok(())
}

/// Checks an explicit shape against the model's declared dims: same rank, fixed dims equal.
fn check_against(flag: &str, shape: &NamedShape, declared: &[Dim]) -> Result<()> {
    if shape.dims.len() != declared.len() {
        bail!(
            "{flag} {}: rank {}, but the model's input '{}' has rank {} ({})",
            shape.name,
            shape.dims.len(),
            shape.name,
            declared.len(),
            crate::tensor::format_dims(declared)
        );
    }
    for (axis, (got, d)) in shape.dims.iter().zip(declared).enumerate() {
        if let Dim::Fixed(n) = d {
            if n != got {
                bail!(
                    "{flag} {}: axis {axis} is {got}, but the model fixes it to {n} ({})",
                    shape.name,
                    crate::tensor::format_dims(declared)
                );
            }
        }
    }
    Ok(())
}

/// The profile for a model whose inputs (after any `--input-shape` pass) are `inputs`.
///
/// Explicit shapes win for the inputs they name; otherwise a dynamic axis 0 takes the batch
/// range, and any other dynamic axis is an error that says which flag to give.
pub(crate) fn resolve_profile(
    inputs: &[TensorInfo],
    batch: &BatchRequest,
    explicit: &ExplicitShapes,
) -> Result<ShapeProfile> {
    for (flag, list) in [
        ("min shapes", &explicit.min),
        ("opt shapes", &explicit.opt),
        ("max shapes", &explicit.max),
    ] {
        for s in list {
            if !inputs.iter().any(|i| i.name == s.name) {
                let names: Vec<_> = inputs.iter().map(|i| i.name.as_str()).collect();
                bail!(
                    "{flag} {}: the model has no input '{}' (inputs: {})",
                    s.name,
                    s.name,
                    names.join(", ")
                );
            }
        }
    }
    let axes = explicit
        .axes
        .iter()
        .map(|a| Ok((resolve_axis(inputs, &a.symbol)?, a.range)))
        .collect::<Result<Vec<_>>>()?;
    let mut out = Vec::with_capacity(inputs.len());
    for input in inputs {
        let declared = input.dims.clone().ok_or_else(|| {
            fix_with(
                Setting::InputShape,
                format!("input '{}' declares no shape", input.name),
            )
        })?;
        let named = [
            find(&explicit.min, &input.name),
            find(&explicit.opt, &input.name),
            find(&explicit.max, &input.name),
        ];
        let profile = match named {
            [Some(min), Some(opt), Some(max)] => {
                check_against("min shapes", min, &declared)?;
                check_against("opt shapes", opt, &declared)?;
                check_against("max shapes", max, &declared)?;
                check_order(&input.name, &min.dims, &opt.dims, &max.dims)?;
                InputProfile {
                    name: input.name.clone(),
                    min: min.dims.clone(),
                    opt: opt.dims.clone(),
                    max: max.dims.clone(),
                }
            }
            [None, None, None] => from_batch(input, &declared, batch, &axes)?,
            _ => {
                return Err(fix_with(
                    Setting::ShapeRanges,
                    format!(
                        "input '{}': give all three of its min, opt and max shapes, or none",
                        input.name
                    ),
                ))
            }
        };
        out.push(profile);
    }
    Ok(ShapeProfile { inputs: out })
}

fn from_batch(
    input: &TensorInfo,
    declared: &[Dim],
    batch: &BatchRequest,
    axes: &[(AxisTarget, BatchRange)],
) -> Result<InputProfile> {
    let mut min = Vec::with_capacity(declared.len());
    let mut opt = Vec::with_capacity(declared.len());
    let mut max = Vec::with_capacity(declared.len());
    for (axis, d) in declared.iter().enumerate() {
        match d {
            Dim::Fixed(n) => {
                min.push(*n);
                opt.push(*n);
                max.push(*n);
            }
            _ if axis == 0 => {
                let r = batch.resolve()?;
                min.push(r.min);
                opt.push(r.opt);
                max.push(r.max);
            }
            d if axes.iter().any(|(t, _)| t.matches(&input.name, axis, d)) => {
                let (_, r) = axes
                    .iter()
                    .find(|(t, _)| t.matches(&input.name, axis, d))
                    .expect("found");
                min.push(r.min);
                opt.push(r.opt);
                max.push(r.max);
            }
            other => {
                return Err(fix_with(
                    Setting::ShapeRanges,
                    format!(
                        "input '{}' axis {axis} ('{other}') is dynamic; fix it with an input shape, or give the range of the named axis or of the input's shapes",
                        input.name
                    ),
                ))
            }
        }
    }
    Ok(InputProfile {
        name: input.name.clone(),
        min,
        opt,
        max,
    })
}

#[cfg(test)]
mod tests;
