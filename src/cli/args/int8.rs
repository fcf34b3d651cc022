//! The INT8 rewrite's flags, shared by `quantize --int8` and `build --int8`: the nodes left in
//! float, what they compute in, and how the weights' ranges are chosen.

use crate::cli::usage;
use crate::onnx::rewrite::plan::Exclusion;
use crate::onnx::rewrite::qdq::{WeightClip, WeightClipping};
use crate::quantize::plan::{Fallback, Int8Plan, Int8Source};
use clap::Args;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How an INT8 model is made beyond its scales.
#[derive(Clone, Debug, Default, Args)]
pub(crate) struct Int8RecipeArgs {
    /// With --int8: nodes left in float, by name (or `#INDEX` for an unnamed one),
    /// comma-separated.
    #[arg(long, value_delimiter = ',', requires = "int8", value_name = "NODES")]
    pub exclude: Vec<String>,
    /// With --int8: op types left in float (`Gemm`), comma-separated.
    #[arg(long, value_delimiter = ',', requires = "int8", value_name = "OPS")]
    pub(crate) exclude_op: Vec<String>,
    /// With --int8: nodes whose whole name matches this regular expression stay in float
    /// (repeatable).
    #[arg(long, requires = "int8", value_name = "REGEX")]
    pub(crate) exclude_regex: Vec<String>,
    /// With --int8: what the nodes not in INT8 compute in: fp32, or fp16 (what a strongly typed
    /// engine runs; the INT8 nodes and their Q/DQ stay float32 so TensorRT fuses them).
    #[arg(long, requires = "int8", value_enum, default_value = "fp32")]
    pub fallback: Fallback,
    /// With --int8: how each weight channel's range is chosen: max (its largest magnitude), or
    /// mse (the fraction of it with the least squared rounding error).
    #[arg(long, requires = "int8", value_enum, default_value = "max")]
    pub(crate) weight_clip: WeightClip,
    /// With --int8: the weights read by nodes of op type OP take this rule instead of
    /// --weight-clip (`Gemm=max`: a classifier head at its full range beside MSE-clipped
    /// convolutions); comma-separated or repeated.
    #[arg(long, value_delimiter = ',', requires = "int8", value_name = "OP=max|mse", value_parser = op_clip)]
    pub(crate) weight_clip_op: Vec<(String, WeightClip)>,
}

/// One `OP=RULE` of `--weight-clip-op`.
fn op_clip(text: &str) -> Result<(String, WeightClip), String> {
    let (op, rule) = text
        .split_once('=')
        .ok_or_else(|| format!("'{text}' is not OP=max or OP=mse"))?;
    let op = op.trim();
    if op.is_empty() || !op.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("'{op}' is not an op type (such as Gemm or Conv)"));
    }
    let rule = rule.trim();
    let rule = <WeightClip as clap::ValueEnum>::from_str(rule, false)
        .map_err(|_| format!("'{rule}' is not a weight clip rule (max or mse)"))?;
    Ok((op.to_string(), rule))
}

impl Int8RecipeArgs {
    /// A usage error when INT8 options are given without `--int8` (clap's `requires` does not
    /// hold beside a flag that conflicts with `--int8`, such as `--fp16`).
    pub fn check(&self, int8: bool) -> anyhow::Result<()> {
        let given = !self.exclusion().is_empty()
            || self.fallback != Fallback::default()
            || self.weight_clip != WeightClip::default()
            || !self.weight_clip_op.is_empty();
        if given && !int8 {
            return Err(usage(
                "--exclude, --exclude-op, --exclude-regex, --fallback, --weight-clip and --weight-clip-op say how an INT8 model is made; give --int8",
            ));
        }
        Ok(())
    }

    /// How the weights' ranges are chosen: `--weight-clip` for all, `--weight-clip-op` per op
    /// type; an op type given twice is a usage error.
    pub(crate) fn clipping(&self) -> anyhow::Result<WeightClipping> {
        let mut by_op = BTreeMap::new();
        for (op, rule) in &self.weight_clip_op {
            if by_op.insert(op.clone(), *rule).is_some() {
                return Err(usage(format!("--weight-clip-op names {op} twice")));
            }
        }
        Ok(WeightClipping {
            all: self.weight_clip,
            by_op,
        })
    }

    /// The INT8 plan these flags describe, its scales from `scales`, leaving in float what the
    /// target search result `search_result` (if any) left there: every INT8 option reaches
    /// `build` and `quantize` through here.
    pub(crate) fn plan(
        &self,
        scales: Int8Source,
        search_result: Option<PathBuf>,
    ) -> anyhow::Result<Int8Plan> {
        Ok(Int8Plan {
            exclude: self.exclusion(),
            fallback: self.fallback,
            weight_clip: self.clipping()?,
            search_result,
            ..Int8Plan::new(scales)
        })
    }

    /// The nodes the flags leave in float.
    pub(crate) fn exclusion(&self) -> Exclusion {
        Exclusion {
            nodes: self.exclude.clone(),
            ops: self.exclude_op.clone(),
            patterns: self.exclude_regex.clone(),
        }
    }
}
