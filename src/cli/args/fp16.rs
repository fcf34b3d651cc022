//! The flags that keep single nodes of an FP16 model in float32 (`--keep-fp32-nodes`,
//! `--keep-fp32-regex`), shared by `quantize --fp16` and `build --fp16`, beside the op types of
//! `--keep-fp32`.

use crate::cli::usage;
use crate::onnx::rewrite::fp16::KeepNodeError;
use clap::Args;

/// Nodes kept in float32 by name or pattern.
#[derive(Clone, Debug, Default, Args)]
pub struct KeepNodeArgs {
    /// With --fp16: nodes kept in float32 by name (or `#INDEX` for an unnamed one),
    /// comma-separated, beside the op types of --keep-fp32.
    #[arg(long, value_delimiter = ',', requires = "fp16", value_name = "NAMES")]
    pub keep_fp32_nodes: Vec<String>,
    /// With --fp16: nodes whose whole name matches this regular expression stay in float32
    /// (repeatable; one that matches no node is a warning).
    #[arg(long, requires = "fp16", value_name = "REGEX")]
    pub keep_fp32_regex: Vec<String>,
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
            return Err(crate::cli::UsageError(
                "--keep-fp32-nodes and --keep-fp32-regex keep nodes of an FP16 model in float32; give --fp16".into(),
            )
            .into());
        }
        Ok(())
    }

    /// The patterns given.
    pub fn patterns(&self) -> Vec<String> {
        self.keep_fp32_regex.clone()
    }
}

/// `e` as a usage error (exit code 2) when it says a node to keep does not exist or a pattern
/// does not parse; any other error as it is.
pub fn keep_errors_as_usage(e: anyhow::Error) -> anyhow::Error {
    if e.chain().any(|c| c.is::<KeepNodeError>()) {
        usage(e)
    } else {
        e
    }
}
