//! The FP16 rewrite's flags, shared by `quantize --fp16` and `build --fp16`: float16 I/O, the
//! op types kept in float32 (`--keep-fp32`) and the single nodes kept beside them
//! (`--keep-fp32-nodes`, `--keep-fp32-regex`).

use crate::cli::usage;
use crate::onnx::rewrite::fp16::{Fp16Options, DEFAULT_KEEP_FP32};
use clap::Args;

/// The FP16 rewrite's options.
#[derive(Clone, Debug, Default, Args)]
pub(crate) struct Fp16Args {
    /// With --fp16: graph inputs and outputs in float16 too (default: float32 with Casts).
    #[arg(long, requires = "fp16")]
    pub fp16_io: bool,
    /// With --fp16: ops kept in float32, comma-separated (replaces the default list; give
    /// `none` for none). Default: the ops that overflow or lose precision in float16.
    #[arg(long, value_delimiter = ',', requires = "fp16", value_name = "OPS")]
    pub(crate) keep_fp32: Option<Vec<String>>,
    /// With --fp16: single nodes kept in float32.
    #[command(flatten)]
    pub(crate) keep_nodes: KeepNodeArgs,
}

impl Fp16Args {
    /// The rewrite's options, as the flags say.
    pub fn options(&self) -> Fp16Options {
        Fp16Options {
            keep_fp32: keep_fp32_list(self.keep_fp32.as_deref()),
            fp16_io: self.fp16_io,
            keep_nodes: self.keep_nodes.nodes(),
            keep_regex: self.keep_nodes.patterns(),
        }
    }
}

/// The ops `--keep-fp32` keeps in float32: the list given, none for `none`, else the defaults.
fn keep_fp32_list(flag: Option<&[String]>) -> Vec<String> {
    match flag {
        Some([only]) if only == "none" => vec![],
        Some(list) => list.iter().map(|s| s.trim().to_string()).collect(),
        None => DEFAULT_KEEP_FP32.iter().map(|s| s.to_string()).collect(),
    }
}

/// Nodes kept in float32 by name or pattern.
#[derive(Clone, Debug, Default, Args)]
pub(crate) struct KeepNodeArgs {
    /// With --fp16: nodes kept in float32 by name (or `#INDEX` for an unnamed one),
    /// comma-separated, beside the op types of --keep-fp32.
    #[arg(long, value_delimiter = ',', requires = "fp16", value_name = "NAMES")]
    pub(crate) keep_fp32_nodes: Vec<String>,
    /// With --fp16: nodes whose whole name matches this regular expression stay in float32
    /// (repeatable; one that matches no node is a warning).
    #[arg(long, requires = "fp16", value_name = "REGEX")]
    pub(crate) keep_fp32_regex: Vec<String>,
}

impl KeepNodeArgs {
    /// The names given, trimmed.
    pub fn nodes(&self) -> Vec<String> {
        self.keep_fp32_nodes
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// A usage error when nodes are given to keep without `--fp16` (they would keep nothing).
    pub fn check(&self, fp16: bool) -> anyhow::Result<()> {
        let given = !self.keep_fp32_nodes.is_empty() || !self.keep_fp32_regex.is_empty();
        if given && !fp16 {
            return Err(usage(
                "--keep-fp32-nodes and --keep-fp32-regex keep nodes of an FP16 model in float32; give --fp16",
            ));
        }
        Ok(())
    }

    /// The patterns given.
    pub(crate) fn patterns(&self) -> Vec<String> {
        self.keep_fp32_regex.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_fp32_is_the_list_given_none_or_the_defaults() {
        assert_eq!(keep_fp32_list(Some(&["none".into()])), Vec::<String>::new());
        assert_eq!(
            keep_fp32_list(Some(&[" Softmax".into(), "Pow".into()])),
            ["Softmax", "Pow"]
        );
        assert_eq!(keep_fp32_list(None).len(), DEFAULT_KEEP_FP32.len());
    }
}
