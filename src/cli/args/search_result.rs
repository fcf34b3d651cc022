//! The flag that applies a target search's result to a rewrite, shared by `quantize` and
//! `build`: the nodes the search left in float stay in float.

use clap::Args;
use std::path::PathBuf;

/// A target search's result for the rewrite.
#[derive(Clone, Debug, Default, Args)]
pub(crate) struct SearchResultArgs {
    /// With --fp16 or --int8: the nodes a target search left in float (its --json report, or
    /// the result it kept) stay in float here too: kept in float32 (FP16) or left out of INT8.
    #[arg(long, value_name = "RESULT.json")]
    pub(crate) float_nodes_from: Option<PathBuf>,
}
