//! What is asked of a model's input shapes: per-input shapes ([`InputShape`]), sizes of named
//! axes ([`NamedDim`]), together a [`ShapeRequest`]; named-axis settings with their sweeps or
//! profile ranges ([`DimRange`]), and trtexec-style fixed named shapes ([`NamedShape`]).

use std::fmt;

/// The name given to a dynamic batch axis when trtkit has to invent one.
pub(crate) const BATCH_SYMBOL: &str = "batch";

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

/// One size for an axis: every input axis declared with the symbol `symbol` gets `size`; an
/// `INPUT:AXIS` key gives that axis (and every axis sharing its symbol, if it has one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedDim {
    /// The axis: its symbol in the model (`seq`, `sequence`, …), or `INPUT:AXIS` (`x:3`).
    pub(crate) symbol: String,
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

/// One `NAME=VALUES` (or `INPUT:AXIS=VALUES`) dim setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimRange {
    /// The axis: its symbol, or `INPUT:AXIS`.
    pub(crate) symbol: String,
    /// Its sizes or range.
    pub values: DimValues,
}

/// One named shape from `--min-shapes`/`--opt-shapes`/`--max-shapes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedShape {
    /// Input name.
    pub name: String,
    /// Dims (all fixed).
    pub dims: Vec<i64>,
}

/// Named axes to sweep, each with its sizes in order (`seq` → 64, 128, 256).
pub type DimSweep = Vec<(String, Vec<i64>)>;

/// Every combination of one size per axis, in order (the first axis varies slowest); one empty
/// combination when there are no axes.
pub(crate) fn dim_points(dims: &[(String, Vec<i64>)]) -> Vec<Vec<NamedDim>> {
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
    pub(crate) fn with_dims(&self, dims: &[NamedDim]) -> Self {
        let mut out = self.clone();
        out.dims.extend(dims.iter().cloned());
        out
    }
}
