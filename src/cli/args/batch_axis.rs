//! `--batch-axis NAME=K` (or `NAME=none`): where an input or output holds its samples, over what
//! the model's named axes say.

use crate::cli::usage;
use crate::tensor::{BatchAxisChoice, BatchAxisRequest};
use clap::Args;

/// The `--batch-axis` flag.
#[derive(Debug, Default, Args)]
pub struct BatchAxisArgs {
    /// The batch axis of an input or output: NAME=K (an axis index), or NAME=none for an input
    /// that is the same for every sample (fed as given); several per flag, or the flag repeated.
    #[arg(long = "batch-axis", value_name = "NAME=K", num_args = 1..)]
    pub batch_axis: Vec<String>,
}

impl BatchAxisArgs {
    /// The batch axes given; a malformed one is a usage error.
    pub fn request(&self) -> anyhow::Result<BatchAxisRequest> {
        let choices = self
            .batch_axis
            .iter()
            .map(|s| s.parse::<BatchAxisChoice>().map_err(usage))
            .collect::<anyhow::Result<_>>()?;
        Ok(BatchAxisRequest(choices))
    }
}
