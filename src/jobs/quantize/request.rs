//! What one `quantize` asks for, and the one function that carries it out: the rewrite alone, or
//! the INT8 triage on real samples (the sensitivity table, the smallest float part that meets a
//! target, or a chosen INT8 model measured), or the FP16 target search. Callers build a [`QuantizeRequest`] and get a
//! [`QuantizeOutcome`]; the searches behind it are named only inside `quantize/`.

use super::{quantize, QuantizeConfig, QuantizeReport};
use crate::onnx::rewrite::plan::Exclusion;
use crate::progress::Progress;
use crate::quantize::evaluate::{measure_int8, EvalConfig, MeasuredReport};
use crate::quantize::fp16_search::{search_fp16_target, Fp16TargetConfig};
use crate::quantize::search_report::SearchReport;
use crate::quantize::sensitivity_scan::{sensitivity, SensitivityReport};
use crate::quantize::target_search::{search_target, TargetConfig};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One `quantize` request.
#[derive(Clone, Debug)]
pub enum QuantizeRequest {
    /// Write the rewritten model (FP16, INT8 or equalised).
    Rewrite(QuantizeConfig),
    /// The per-node INT8 sensitivity table, from the baseline with `exclude` in float.
    Sensitivity {
        /// The samples and the reference backend.
        eval: EvalConfig,
        /// Nodes in float in the baseline.
        exclude: Exclusion,
    },
    /// The smallest float part that meets a target, written as a model.
    Target(TargetConfig),
    /// The fewest nodes of an FP16 model kept in float32 that meet a target, written as a model.
    Fp16Target(Fp16TargetConfig),
    /// Write the INT8 model with `exclude` in float and measure it on the samples.
    Measured {
        /// The samples and the reference backend.
        eval: EvalConfig,
        /// Nodes left in float.
        exclude: Exclusion,
        /// The model to write.
        output: PathBuf,
    },
}

/// What a request produced: the report of the job it ran (the JSON is that report's own).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum QuantizeOutcome {
    /// The rewrite's report.
    Rewrite(QuantizeReport),
    /// The sensitivity table.
    Sensitivity(SensitivityReport),
    /// A target search's result, INT8 or FP16.
    Search(Box<SearchReport>),
    /// The measured INT8 model.
    Measured(Box<MeasuredReport>),
}

/// Runs `request`, telling `progress` how the variants advance.
pub(crate) fn run_request(
    request: &QuantizeRequest,
    progress: &dyn Progress,
) -> Result<QuantizeOutcome> {
    Ok(match request {
        QuantizeRequest::Rewrite(config) => QuantizeOutcome::Rewrite(quantize(config)?),
        QuantizeRequest::Sensitivity { eval, exclude } => {
            QuantizeOutcome::Sensitivity(sensitivity(eval, exclude, progress)?)
        }
        QuantizeRequest::Target(config) => {
            QuantizeOutcome::Search(Box::new(search_target(config, progress)?))
        }
        QuantizeRequest::Fp16Target(config) => {
            QuantizeOutcome::Search(Box::new(search_fp16_target(config, progress)?))
        }
        QuantizeRequest::Measured {
            eval,
            exclude,
            output,
        } => QuantizeOutcome::Measured(Box::new(measure_int8(eval, exclude, output, progress)?)),
    })
}
