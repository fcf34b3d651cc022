//! What a target search found, INT8 or FP16 alike: one report type (also the kept result), with
//! the part every search has (the goal, the nodes left in float, the scores, the samples, the
//! kept result) and the part of its precision ([`SearchPrecision`]). Its JSON is the two earlier
//! reports' JSON: each precision's fields sit beside the common ones, under their own names
//! (`full_int8`, `int8_share` / `full_fp16`, `fp16_share`), so results kept by 0.1.0 read back.

use crate::metrics::bootstrap::IntervalScores as Score;
use crate::quantize::adaptive_rounding::RoundingReport;
use crate::quantize::evaluate::WeightRounding;
use crate::quantize::kept_result::read_kept;
use crate::quantize::reference::SampleUse;
use crate::quantize::scale_search::ScaleSearchReport;
use crate::quantize::search::{Found, Goal, Strategy};
use crate::tensor::Precision;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Instant;

/// What a target search found (also the kept result).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SearchReport {
    /// The model.
    pub model: String,
    /// The model written.
    pub output: String,
    /// The goal.
    pub goal: Goal,
    /// Whether the written model meets it on the check samples (on the tuning samples when
    /// there is no check set).
    pub met: bool,
    /// Whether it meets it on the tuning samples the search chose on.
    #[serde(default)]
    pub met_on_tuning: bool,
    /// What the user should know about how "met" was decided (a check that missed, and what the
    /// search did about it; no check set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Nodes left in float, in graph order (for FP16, beside the op types and nodes the user
    /// kept in float32).
    pub float_nodes: Vec<String>,
    /// The written model's score on the tuning samples.
    pub score: Score,
    /// Its score on the check samples (absent without a check set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Score>,
    /// When the tuning samples met the goal and the check did not: the check score of the
    /// model the search had chosen then, before the check made it go on (from then on the check
    /// chose where to stop, so the final check score is no longer untouched by the search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) check_when_tuning_met: Option<Score>,
    /// The samples scored.
    pub samples: SampleUse,
    /// Variants measured.
    pub variants: usize,
    /// How the float part was searched for.
    #[serde(default)]
    pub strategy: Strategy,
    /// The kept result this came from (or was written to).
    pub result: String,
    /// Whether the result was reused rather than searched.
    pub reused: bool,
    /// Wall time, seconds.
    pub wall_s: f64,
    /// What only a search of its precision reports.
    #[serde(flatten)]
    pub precision: SearchPrecision,
}

/// The part of a search report only its precision has.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SearchPrecision {
    /// An INT8 search: the nodes left in float are the float part.
    Int8(Int8Search),
    /// An FP16 search: the nodes kept in float32 are the float part.
    Fp16(Fp16Search),
}

/// What an INT8 search reports beyond the common part.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Int8Search {
    /// Every quantizable node in INT8, on the tuning samples.
    pub full_int8: Score,
    /// The same on the check samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) full_int8_check: Option<Score>,
    /// Share of the counted MACs that run in INT8, in [0, 1].
    pub int8_share: Option<f64>,
    /// How the weights were rounded.
    #[serde(default)]
    pub weight_rounding: WeightRounding,
    /// What the activation scale search changed (when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_search: Option<ScaleSearchReport>,
    /// What adaptive rounding changed (when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounding: Option<RoundingReport>,
}

/// What an FP16 search reports beyond the common part.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fp16Search {
    /// The nodes the search kept in float32, each with why.
    pub kept: Vec<KeptNode>,
    /// Every candidate in float16, on the tuning samples.
    pub full_fp16: Score,
    /// The same on the check samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) full_fp16_check: Option<Score>,
    /// Share of the counted MACs computed in float16, in [0, 1].
    pub(crate) fp16_share: Option<f64>,
    /// The op types kept in float32 in every variant.
    pub(crate) keep_fp32: Vec<String>,
    /// The nodes the user kept in float32 in every variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) keep_nodes: Vec<String>,
    /// Whether the variants were scored with float16 arithmetic emulated (a CPU backend).
    pub emulated: bool,
}

/// How a search that ran now went, beside what it found: what every report of it says.
pub(crate) struct Ran<'a> {
    /// The model searched.
    pub model: &'a Path,
    /// The model written.
    pub output: &'a Path,
    /// The goal.
    pub goal: Goal,
    /// How the float part was searched for.
    pub strategy: Strategy,
    /// Where the result is kept.
    pub result: &'a Path,
    /// What the user should know before the search's own notes.
    pub notes: Vec<String>,
    /// When the search started.
    pub started: Instant,
}

impl SearchReport {
    /// The report of a search that `ran` now and found `found` (its float nodes named
    /// `float_nodes`, scored on `samples`), with its precision's own part.
    pub(crate) fn ran(
        ran: Ran<'_>,
        found: &Found,
        float_nodes: Vec<String>,
        samples: SampleUse,
        precision: SearchPrecision,
    ) -> SearchReport {
        let mut notes = ran.notes;
        notes.extend(found.notes.iter().cloned());
        SearchReport {
            model: ran.model.display().to_string(),
            output: ran.output.display().to_string(),
            goal: ran.goal,
            met: found.met(&ran.goal),
            met_on_tuning: ran.goal.met_by(&found.score),
            notes,
            float_nodes,
            score: found.score,
            check: found.check,
            check_when_tuning_met: found.check_when_tuning_met,
            samples,
            variants: found.variants,
            strategy: ran.strategy,
            result: ran.result.display().to_string(),
            reused: false,
            wall_s: ran.started.elapsed().as_secs_f64(),
            precision,
        }
    }

    /// The search result kept at `kept`, for a search of `precision`: `Err` with why it cannot be
    /// reused (stale, unreadable, or the result of a search of another precision), `Ok(None)`
    /// when there is none.
    pub(crate) fn read_kept(
        kept: &Path,
        precision: Precision,
    ) -> Result<Option<SearchReport>, String> {
        match read_kept::<SearchReport>(kept)? {
            Some(found) if found.precision() != precision => Err(format!(
                "it is the result of an {} search",
                found.precision().to_string().to_uppercase()
            )),
            found => Ok(found),
        }
    }

    /// The precision the search was for.
    pub fn precision(&self) -> Precision {
        match self.precision {
            SearchPrecision::Int8(_) => Precision::Int8,
            SearchPrecision::Fp16(_) => Precision::Fp16,
        }
    }

    /// The score of every candidate in the searched precision: on the tuning samples, and on
    /// the check samples where there are.
    pub fn full(&self) -> (&Score, Option<&Score>) {
        match &self.precision {
            SearchPrecision::Int8(p) => (&p.full_int8, p.full_int8_check.as_ref()),
            SearchPrecision::Fp16(p) => (&p.full_fp16, p.full_fp16_check.as_ref()),
        }
    }

    /// The INT8 part, for an INT8 search.
    pub fn int8(&self) -> Option<&Int8Search> {
        match &self.precision {
            SearchPrecision::Int8(p) => Some(p),
            SearchPrecision::Fp16(_) => None,
        }
    }

    /// The FP16 part, for an FP16 search.
    pub fn fp16(&self) -> Option<&Fp16Search> {
        match &self.precision {
            SearchPrecision::Fp16(p) => Some(p),
            SearchPrecision::Int8(_) => None,
        }
    }
}

/// Why the search kept a node in float32.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum KeepReason {
    /// The float model's output of the node passes ±65504 on the tuning samples.
    Overflow {
        /// The largest magnitude seen.
        max_abs: f64,
    },
    /// Keeping it in float32 brings the output closer to the float model's.
    MeasuredError {
        /// The goal's measure with only this node in float32, on the tuning samples (absent
        /// when not measured, or not a number).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alone: Option<f64>,
        /// What that gains over every candidate in float16 (absent where either is not finite:
        /// an all-FP16 output with NaN or ±Inf values).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovers: Option<f64>,
    },
}

/// A node the search kept in float32, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeptNode {
    /// Its name (or `#INDEX`).
    pub name: String,
    /// Its op type.
    pub op: String,
    /// Why it stays float32.
    #[serde(flatten)]
    pub why: KeepReason,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A search report of `precision`'s part, every common field at a plain value.
    fn report(precision: SearchPrecision) -> SearchReport {
        SearchReport {
            model: "m.onnx".into(),
            output: "q.onnx".into(),
            goal: Goal::Cosine(0.99),
            met: true,
            met_on_tuning: true,
            notes: vec![],
            float_nodes: vec!["conv_2".into()],
            score: Score::default(),
            check: None,
            check_when_tuning_met: None,
            samples: SampleUse::default(),
            variants: 7,
            strategy: Strategy::default(),
            result: "r.json".into(),
            reused: false,
            wall_s: 1.5,
            precision,
        }
    }

    /// `names`, sorted.
    fn sorted(names: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        names.sort();
        names
    }

    /// The keys of `report`'s JSON, sorted.
    fn keys(report: &SearchReport) -> Vec<String> {
        let value = serde_json::to_value(report).unwrap();
        let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    }

    #[test]
    fn a_kept_result_of_the_other_precision_is_not_reused_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("r.json");
        assert!(SearchReport::read_kept(&kept, Precision::Int8)
            .unwrap()
            .is_none());
        let fp16 = report(SearchPrecision::Fp16(Fp16Search {
            kept: vec![],
            full_fp16: Score::default(),
            full_fp16_check: None,
            fp16_share: None,
            keep_fp32: vec![],
            keep_nodes: vec![],
            emulated: false,
        }));
        crate::quantize::kept_result::keep(&kept, &fp16).unwrap();
        let same = SearchReport::read_kept(&kept, Precision::Fp16).unwrap();
        assert_eq!(same.unwrap().precision(), Precision::Fp16);
        assert_eq!(
            SearchReport::read_kept(&kept, Precision::Int8).unwrap_err(),
            "it is the result of an FP16 search"
        );
    }

    #[test]
    fn each_precision_writes_the_keys_its_own_report_wrote_and_reads_back_as_itself() {
        let int8 = report(SearchPrecision::Int8(Int8Search {
            full_int8: Score::default(),
            full_int8_check: None,
            int8_share: Some(0.8),
            weight_rounding: WeightRounding::default(),
            scale_search: None,
            rounding: None,
        }));
        // The keys the INT8 target report of 0.1.0 wrote, with no check set or tuning.
        let old_int8 = sorted(&[
            "model",
            "output",
            "goal",
            "met",
            "met_on_tuning",
            "float_nodes",
            "score",
            "full_int8",
            "int8_share",
            "samples",
            "weight_rounding",
            "variants",
            "strategy",
            "result",
            "reused",
            "wall_s",
        ]);
        assert_eq!(keys(&int8), old_int8);
        let back: SearchReport =
            serde_json::from_value(serde_json::to_value(&int8).unwrap()).unwrap();
        assert_eq!(back.precision(), Precision::Int8);
        assert_eq!(back.int8().unwrap().int8_share, Some(0.8));

        let fp16 = report(SearchPrecision::Fp16(Fp16Search {
            kept: vec![KeptNode {
                name: "matmul_0".into(),
                op: "MatMul".into(),
                why: KeepReason::Overflow { max_abs: 7e4 },
            }],
            full_fp16: Score::default(),
            full_fp16_check: None,
            fp16_share: None,
            keep_fp32: vec!["Softmax".into()],
            keep_nodes: vec![],
            emulated: true,
        }));
        let old_fp16 = sorted(&[
            "model",
            "output",
            "goal",
            "met",
            "met_on_tuning",
            "float_nodes",
            "kept",
            "score",
            "full_fp16",
            "fp16_share",
            "keep_fp32",
            "emulated",
            "samples",
            "variants",
            "strategy",
            "result",
            "reused",
            "wall_s",
        ]);
        assert_eq!(keys(&fp16), old_fp16);
        let back: SearchReport =
            serde_json::from_value(serde_json::to_value(&fp16).unwrap()).unwrap();
        assert_eq!(back.precision(), Precision::Fp16);
        assert_eq!(back.fp16().unwrap().kept[0].name, "matmul_0");
        assert!(back.int8().is_none());
    }
}
