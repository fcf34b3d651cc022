//! The smallest float part that keeps an INT8 model at an accuracy target: rank the quantized
//! nodes by what leaving each alone in float recovers, bisect over that order for the shortest
//! prefix that meets the target, then give back to INT8 every node of the prefix the target
//! does not need (each step measured). The search's result is kept under a key (model, scales,
//! samples, fallback, target), with its SHA-256 beside it, so the same question is answered
//! again without measuring, from a result that is the one the search wrote.

use crate::atomic_file::write_atomic;
use crate::calibration::cache::CalibrationTable;
use crate::onnx::model::{file_sha256, sha256_hex};
use crate::onnx::rewrite::constant_weights::lift_constant_weights;
use crate::onnx::rewrite::plan::{plan_int8, Exclusion};
use crate::onnx::rewrite::qdq::WeightQuant;
use crate::onnx::OnnxModel;
use crate::progress::Progress;
use crate::quantize::adaptive_rounding::RoundingReport;
use crate::quantize::eval_samples::samples_fingerprint;
use crate::quantize::evaluate::{EvalConfig, Evaluator, SampleUse, Score, WeightRounding};
use crate::quantize::job::int8_model;
use crate::quantize::scale_search::{ScaleSearch, ScaleSearchReport};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What the INT8 model must keep.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    /// Cosine of the first output against the float model, at least this.
    Cosine(f64),
    /// Top-1 agreement with the float model, % , at least this.
    Agreement(f64),
}

impl Goal {
    /// Whether `score` meets it.
    pub fn met_by(&self, score: &Score) -> bool {
        match *self {
            Goal::Cosine(c) => score.cosine >= c,
            Goal::Agreement(p) => score.top1_agreement_pct.is_some_and(|a| a >= p),
        }
    }

    /// The score's value on the goal's measure; a NaN cosine (outputs that differ in NaN or
    /// ±Inf values) is the worst there is.
    fn value(&self, score: &Score) -> f64 {
        match self {
            Goal::Cosine(_) if score.cosine.is_nan() => f64::NEG_INFINITY,
            Goal::Cosine(_) => score.cosine,
            Goal::Agreement(_) => score.top1_agreement_pct.unwrap_or(0.0),
        }
    }
}

/// The search's job.
#[derive(Clone, Debug)]
pub struct TargetConfig {
    /// The model, scales and samples.
    pub eval: EvalConfig,
    /// What to keep.
    pub goal: Goal,
    /// Where the INT8 model goes.
    pub output: PathBuf,
    /// Folder of kept search results; `None`: the calibration cache's folder.
    pub result_dir: Option<PathBuf>,
    /// Search again even if a result with the same key is kept.
    pub research: bool,
    /// How the float part is searched for.
    pub strategy: Strategy,
}

/// What the search found (also the kept result).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetReport {
    /// The model.
    pub model: String,
    /// The INT8 model written.
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
    /// Nodes left in float, in graph order.
    pub float_nodes: Vec<String>,
    /// The written model's score on the tuning samples.
    pub score: Score,
    /// Its score on the check samples (absent without a check set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Score>,
    /// Every quantizable node in INT8, on the tuning samples.
    pub full_int8: Score,
    /// The same on the check samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_int8_check: Option<Score>,
    /// When the tuning samples met the goal and the check did not: the check score of the
    /// model the search had chosen then, before the check made it go on (from then on the check
    /// chose where to stop, so the final check score is no longer untouched by the search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_when_tuning_met: Option<Score>,
    /// Share of the counted MACs that run in INT8, in [0, 1].
    pub int8_share: Option<f64>,
    /// The samples scored.
    pub samples: SampleUse,
    /// How the weights were rounded.
    #[serde(default)]
    pub weight_rounding: WeightRounding,
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
    /// What the activation scale search changed (when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_search: Option<ScaleSearchReport>,
    /// What adaptive rounding changed (when asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounding: Option<RoundingReport>,
}

/// The key of a search: everything its answer depends on (the reference backend too: its
/// scores differ slightly).
fn result_key(config: &TargetConfig, fingerprint: &str) -> Result<String> {
    let e = &config.eval;
    let key = serde_json::json!({
        "model": file_sha256(&e.model)?,
        "cache": file_sha256(&e.cache)?,
        "samples": fingerprint,
        "batch": e.batch_size,
        "shapes": format!("{:?}", e.backend.input_shapes),
        "fallback": e.fallback,
        "bias_correction": e.bias_correction,
        "weight_clip": e.weight_clip,
        "scale_search": e.scale_search,
        "weight_rounding": e.weight_rounding,
        "check": e.check,
        "backend": e.backend.kind,
        "device": format!("{:?}", e.backend.device),
        "goal": config.goal,
        "strategy": config.strategy,
        "trtkit": env!("CARGO_PKG_VERSION"),
    });
    Ok(sha256_hex(key.to_string().as_bytes())[..16].to_string())
}

impl TargetConfig {
    /// The folder kept search results go to: the one given, else the calibration cache's.
    pub fn result_dir(&self) -> PathBuf {
        if let Some(dir) = &self.result_dir {
            return dir.clone();
        }
        self.eval
            .cache
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
    }
}

fn result_path(config: &TargetConfig, key: &str) -> PathBuf {
    let stem = config
        .eval
        .model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    config
        .result_dir()
        .join(format!("{stem}-int8-target-{key}.json"))
}

/// The file beside a kept result that holds its SHA-256, as `sha256sum` writes it.
fn hash_path(kept: &Path) -> PathBuf {
    let mut name = kept.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

/// The kept result at `kept` when its bytes are the ones its hash file vouches for; `Err`
/// with the reason when one is there but cannot be reused, `Ok(None)` when there is none.
fn read_kept(kept: &Path) -> Result<Option<TargetReport>, String> {
    let Ok(bytes) = std::fs::read(kept) else {
        return Ok(None);
    };
    let hashes = hash_path(kept);
    let Ok(line) = std::fs::read_to_string(&hashes) else {
        return Err(format!(
            "{} has no hash file {} (written by an older trtkit, or cut short), so it cannot be checked",
            kept.display(),
            hashes.display()
        ));
    };
    if line.split_whitespace().next() != Some(sha256_hex(&bytes).as_str()) {
        return Err(format!(
            "{} is not the file {} vouches for (another SHA-256): changed since trtkit wrote it, stale or tampered",
            kept.display(),
            hashes.display()
        ));
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("{} is unreadable ({e})", kept.display()))
}

/// Writes a search's result and then its hash file, each atomically: a run interrupted between
/// the two leaves a hash file that does not vouch for the new result.
fn write_kept(kept: &Path, report: &TargetReport) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(report)?;
    write_atomic(kept, &bytes)?;
    let name = kept.file_name().unwrap_or_default().to_string_lossy();
    let line = format!("{}  {name}\n", sha256_hex(&bytes));
    write_atomic(&hash_path(kept), line.as_bytes())
}

/// Searches (or reuses a kept answer), writes the INT8 model and reports.
pub fn search_target(config: &TargetConfig, progress: &dyn Progress) -> Result<TargetReport> {
    let start = Instant::now();
    let mut model = OnnxModel::load(&config.eval.model)?;
    lift_constant_weights(&mut model);
    let fingerprint = samples_fingerprint(&model, &config.eval)?;
    let key = result_key(config, &fingerprint)?;
    let kept = result_path(config, &key);
    let mut not_reused = None;
    if !config.research {
        let found = read_kept(&kept).unwrap_or_else(|why| {
            not_reused = Some(format!("the kept search was not reused: {why}"));
            None
        });
        if let Some(mut found) = found {
            // Labels are names or `#INDEX`, which is what an exclusion resolves.
            let float = Exclusion {
                nodes: found.float_nodes.clone(),
                ..Default::default()
            }
            .resolve(model.graph())
            .with_context(|| format!("{}: a kept search result", kept.display()))?;
            let tuned = config.eval.bias_correction
                || config.eval.scale_search != ScaleSearch::Off
                || config.eval.weight_rounding != WeightRounding::Nearest;
            let out = if tuned {
                Evaluator::from_model(model, &config.eval, progress)?.variant(&float)?
            } else {
                plain_int8(config, &model, &float)?
            };
            save(config, out)?;
            found.output = config.output.display().to_string();
            found.reused = true;
            found.wall_s = start.elapsed().as_secs_f64();
            return Ok(found);
        }
    }
    let eval = Evaluator::from_model(model, &config.eval, progress)?;
    let goal = config.goal;
    let mut search = Search {
        eval: &eval,
        goal,
        progress,
        variants: 0,
    };
    progress.start("variants", None);
    let full = search.score(&BTreeSet::new())?;
    let full_check = eval.check_score(&BTreeSet::new())?;
    let mut ranked = vec![];
    let (mut float, mut best) = if goal.met_by(&full) {
        (BTreeSet::new(), full)
    } else {
        ranked = search.rank()?;
        let (float, at) = match config.strategy {
            Strategy::Bisect => search.bisect(&ranked)?,
            Strategy::Greedy => search.greedy(&ranked, full)?,
        };
        if goal.met_by(&at) {
            search.give_back(&ranked, float, at)?
        } else {
            (float, at)
        }
    };
    let met_on_tuning = goal.met_by(&best);
    let mut check = eval.check_score(&float)?;
    let mut notes: Vec<String> = not_reused.into_iter().collect();
    let mut check_when_tuning_met = None;
    if met_on_tuning && check.is_some_and(|c| !goal.met_by(&c)) {
        check_when_tuning_met = check;
        if ranked.is_empty() {
            ranked = search.rank()?;
        }
        let missed = check.map(|c| goal.value(&c)).unwrap_or_default();
        let before = float.len();
        (float, best, check) = search.until_checked(&ranked, float, best)?;
        notes.push(match check {
            Some(c) if goal.met_by(&c) => format!(
                "the check samples missed the goal ({missed:.5}) where the tuning samples met it; {} more nodes left in float until the check met it too",
                float.len() - before
            ),
            _ => format!(
                "the check samples miss the goal ({missed:.5}) where the tuning samples meet it, even with every quantized node in float; the written model is the last one tried"
            ),
        });
    }
    if check.is_none() {
        notes.push("no check set (--check-fraction 0): the goal was judged on the samples the search tuned on".into());
    }
    let variants = search.variants;
    progress.finish();
    save(config, eval.variant(&float)?)?;
    let report = TargetReport {
        model: config.eval.model.display().to_string(),
        output: config.output.display().to_string(),
        goal,
        met: goal.met_by(check.as_ref().unwrap_or(&best)),
        met_on_tuning: goal.met_by(&best),
        notes,
        float_nodes: float.iter().map(|&i| eval.label(i)).collect(),
        score: best,
        check,
        full_int8: full,
        full_int8_check: full_check,
        check_when_tuning_met,
        int8_share: eval.int8_share(&float),
        samples: eval.sample_use(),
        weight_rounding: config.eval.weight_rounding,
        variants,
        strategy: config.strategy,
        result: kept.display().to_string(),
        reused: false,
        wall_s: start.elapsed().as_secs_f64(),
        scale_search: eval.scale_search.clone(),
        rounding: eval.rounding.clone(),
    };
    let dir = config.result_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    write_kept(&kept, &report)?;
    Ok(report)
}

/// How the float part is searched for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Bisect over the nodes ranked by what leaving each alone in float recovers, for the
    /// shortest prefix that meets the goal (Polygraphy's `debug precision` bisects likewise).
    Bisect,
    /// Add one node at a time, each the best of the next [`GREEDY_CANDIDATES`] of the ranking
    /// measured together with the nodes already in float (re-ranked after every step). The
    /// default: on both real models measured it left fewer MACs in float than bisection did,
    /// for 1.2–2.4× the variants.
    #[default]
    Greedy,
}

/// How many of the ranking's next nodes each greedy step measures.
pub const GREEDY_CANDIDATES: usize = 4;

/// One search's evaluator, goal and count of variants measured.
struct Search<'a> {
    eval: &'a Evaluator,
    goal: Goal,
    progress: &'a dyn Progress,
    variants: usize,
}

impl Search<'_> {
    /// The score with `float` left in float (counted).
    fn score(&mut self, float: &BTreeSet<usize>) -> Result<Score> {
        self.variants += 1;
        self.progress.advance(1);
        self.eval.score(float)
    }

    /// Every quantized node with what leaving it alone in float scores, best first.
    fn rank(&mut self) -> Result<Vec<(usize, f64)>> {
        let mut ranked = vec![];
        for n in self.eval.quantized_nodes() {
            self.progress
                .status(format!("ranking {}", self.eval.label(n)));
            let s = self.score(&BTreeSet::from([n]))?;
            ranked.push((n, self.goal.value(&s)));
        }
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(ranked)
    }

    /// The shortest prefix of `ranked` that meets the goal, by bisection (the whole list is
    /// the float model), and its score.
    fn bisect(&mut self, ranked: &[(usize, f64)]) -> Result<(BTreeSet<usize>, Score)> {
        let prefix = |k: usize| -> BTreeSet<usize> { ranked[..k].iter().map(|r| r.0).collect() };
        let (mut lo, mut hi) = (0, ranked.len());
        let mut at_hi = self.score(&prefix(hi))?;
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            self.progress.status(format!(
                "bisecting: {mid} of {} nodes in float",
                ranked.len()
            ));
            let s = self.score(&prefix(mid))?;
            if self.goal.met_by(&s) {
                (hi, at_hi) = (mid, s);
            } else {
                lo = mid;
            }
        }
        Ok((prefix(hi), at_hi))
    }

    /// Nodes added to the float part one at a time until the goal is met: each step measures
    /// the next [`GREEDY_CANDIDATES`] of the ranking with the float part so far and keeps the
    /// best; the measured ones are re-ranked by what they scored.
    fn greedy(&mut self, ranked: &[(usize, f64)], full: Score) -> Result<(BTreeSet<usize>, Score)> {
        let mut rest = ranked.to_vec();
        let mut float = BTreeSet::new();
        let mut at = full;
        while !self.goal.met_by(&at) && !rest.is_empty() {
            at = self.greedy_step(&mut rest, &mut float)?;
        }
        Ok((float, at))
    }

    /// One greedy step: the best of the next [`GREEDY_CANDIDATES`] of `rest`, measured with
    /// `float`, moves into `float`; the measured ones are re-ranked by what they scored.
    /// Returns the new float part's score. `rest` must not be empty.
    fn greedy_step(
        &mut self,
        rest: &mut Vec<(usize, f64)>,
        float: &mut BTreeSet<usize>,
    ) -> Result<Score> {
        let mut tried = vec![];
        for (i, &(n, _)) in rest.iter().enumerate().take(GREEDY_CANDIDATES) {
            let mut more = float.clone();
            more.insert(n);
            self.progress.status(format!(
                "greedy: {} in float, trying {}",
                float.len(),
                self.eval.label(n)
            ));
            let s = self.score(&more)?;
            tried.push((i, s));
        }
        for &(i, s) in &tried {
            rest[i].1 = self.goal.value(&s);
        }
        let (i, s) = tried
            .into_iter()
            .max_by(|a, b| self.goal.value(&a.1).total_cmp(&self.goal.value(&b.1)))
            .context("no node left to move into float")?;
        float.insert(rest.remove(i).0);
        rest.sort_by(|a, b| b.1.total_cmp(&a.1));
        Ok(s)
    }

    /// Grows `float` a greedy step at a time until the check samples meet the goal too (or
    /// every node is in float): the nodes are still chosen on the tuning samples, but the
    /// check decides where to stop, so from here its score is not untouched by the search
    /// (the report keeps the check score from before, `check_when_tuning_met`). Returns the
    /// float part, its tuning score and its check score.
    fn until_checked(
        &mut self,
        ranked: &[(usize, f64)],
        mut float: BTreeSet<usize>,
        mut at: Score,
    ) -> Result<(BTreeSet<usize>, Score, Option<Score>)> {
        let mut rest: Vec<(usize, f64)> = ranked
            .iter()
            .filter(|r| !float.contains(&r.0))
            .copied()
            .collect();
        loop {
            self.progress.status(format!(
                "checking {} nodes in float on the samples kept apart",
                float.len()
            ));
            self.variants += 1;
            let check = self.eval.check_score(&float)?;
            if check.is_none_or(|c| self.goal.met_by(&c)) || rest.is_empty() {
                return Ok((float, at, check));
            }
            at = self.greedy_step(&mut rest, &mut float)?;
        }
    }

    /// Gives back to INT8 each node of `float` the goal does not need, the least helpful (by
    /// `ranked`) first.
    fn give_back(
        &mut self,
        ranked: &[(usize, f64)],
        mut float: BTreeSet<usize>,
        mut best: Score,
    ) -> Result<(BTreeSet<usize>, Score)> {
        let members: Vec<usize> = ranked
            .iter()
            .rev()
            .map(|r| r.0)
            .filter(|n| float.contains(n))
            .collect();
        for n in members {
            let mut fewer = float.clone();
            fewer.remove(&n);
            self.progress
                .status(format!("trying {} in INT8", self.eval.label(n)));
            let s = self.score(&fewer)?;
            if self.goal.met_by(&s) {
                (float, best) = (fewer, s);
            }
        }
        Ok((float, best))
    }
}

/// The INT8 model with `float` left in float, without an evaluator (a reused search that needs
/// no measured bias correction).
fn plain_int8(
    config: &TargetConfig,
    model: &OnnxModel,
    float: &BTreeSet<usize>,
) -> Result<OnnxModel> {
    let table = CalibrationTable::load(&config.eval.cache)?;
    int8_model(
        model,
        plan_int8(model.graph()).without(float),
        &table.scales,
        config.eval.fallback,
        &WeightQuant::nearest(config.eval.weight_clip),
    )
}

/// Writes `model` (atomically) where the search's INT8 model goes.
fn save(config: &TargetConfig, model: OnnxModel) -> Result<()> {
    OnnxModel::from_proto(model.proto, &config.output).save(&config.output)
}
