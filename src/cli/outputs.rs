//! The check every command makes of the files it was told to write, before any work: a usage
//! error for an output that would replace a device, a FIFO or a folder, or one of the command's
//! own inputs ([`crate::output_path::check_outputs`]).

use crate::cli::usage;
use crate::output_path::{self, NamedPath};
use anyhow::Result;
use std::path::Path;

/// A path a flag may name, and the flag.
pub(crate) type MaybePath<'a> = (&'a str, Option<&'a Path>);

fn given<'a>(paths: &[MaybePath<'a>]) -> Vec<NamedPath<'a>> {
    paths
        .iter()
        .filter_map(|(flag, p)| p.map(|p| (*flag, p)))
        .collect()
}

/// Refuses `outputs` that cannot be written in place or that are one of `inputs`, as a usage
/// error naming the flags (paths not given are left out).
pub(crate) fn check_outputs(outputs: &[MaybePath], inputs: &[MaybePath]) -> Result<()> {
    output_path::check_outputs(&given(outputs), &given(inputs)).map_err(usage)
}
