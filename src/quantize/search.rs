//! The search for the smallest float part that keeps a reduced-precision model at an accuracy
//! target, whatever the precision: a [`Variants`] says what "the model with these nodes left in
//! float" is and how close it stays to the float model (the INT8 evaluator and the FP16 one both
//! are); [`find`] ranks the candidates by what leaving each alone in float recovers, bisects or
//! grows greedily over that order for the fewest that meet the goal on the tuning samples, gives
//! back every node the goal does not need, and then makes sure the check samples, which the
//! choice never saw, meet it too.

use crate::progress::Progress;
use crate::quantize::evaluate::{SampleUse, Score};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What the reduced-precision model must keep.
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
    pub(crate) fn met_by(&self, score: &Score) -> bool {
        match *self {
            Goal::Cosine(c) => score.cosine >= c,
            Goal::Agreement(p) => score.top1_agreement_pct.is_some_and(|a| a >= p),
        }
    }

    /// The score's value on the goal's measure; a NaN cosine (outputs that differ in NaN or
    /// ±Inf values) is the worst there is.
    pub fn value(&self, score: &Score) -> f64 {
        match self {
            Goal::Cosine(_) if score.cosine.is_nan() => f64::NEG_INFINITY,
            Goal::Cosine(_) => score.cosine,
            Goal::Agreement(_) => score.top1_agreement_pct.unwrap_or(0.0),
        }
    }
}

/// A model whose candidate nodes can each be left in float, and how close each such variant
/// stays to the float model.
pub trait Variants {
    /// The nodes the search may leave in float, in graph order.
    fn candidates(&self) -> Vec<usize>;
    /// The score, on the tuning samples, of the variant with `float` left in float.
    fn score(&self, float: &BTreeSet<usize>) -> Result<Score>;
    /// The same variant's score on the check samples (`None` without a check set).
    fn check_score(&self, float: &BTreeSet<usize>) -> Result<Option<Score>>;
    /// A node's label (its name, or `#INDEX`).
    fn label(&self, node: usize) -> String;
    /// The share of the counted MACs that run in reduced precision with `float` in float.
    fn share(&self, float: &BTreeSet<usize>) -> Option<f64>;
    /// Which samples the scores come from.
    fn sample_use(&self) -> SampleUse;
    /// Candidates that lead the ranking whatever they score alone (a known cause of failure,
    /// such as a value beyond the reduced precision's range).
    fn leading(&self) -> BTreeSet<usize> {
        BTreeSet::new()
    }
}

/// What a search found.
#[derive(Clone, Debug)]
pub struct Found {
    /// The nodes left in float.
    pub float: BTreeSet<usize>,
    /// Their variant's score on the tuning samples.
    pub score: Score,
    /// Its score on the check samples.
    pub check: Option<Score>,
    /// No node in float, on the tuning samples.
    pub full: Score,
    /// The same on the check samples.
    pub(crate) full_check: Option<Score>,
    /// The check score of the variant chosen on the tuning samples when the check missed the
    /// goal and the search went on.
    pub(crate) check_when_tuning_met: Option<Score>,
    /// What the user should know about how "met" was decided.
    pub notes: Vec<String>,
    /// Each ranked candidate with the goal's value of its variant alone in float (empty when the
    /// search did not rank: the goal was met with none).
    pub alone: Vec<(usize, f64)>,
    /// Variants measured.
    pub variants: usize,
}

impl Found {
    /// Whether the goal is met on the check samples (on the tuning samples without them).
    pub fn met(&self, goal: &Goal) -> bool {
        goal.met_by(self.check.as_ref().unwrap_or(&self.score))
    }
}

/// Searches `eval`'s candidates for the fewest left in float that meet `goal` (see the module
/// comment), telling `progress` of every variant.
pub fn find(
    eval: &dyn Variants,
    goal: Goal,
    strategy: Strategy,
    progress: &dyn Progress,
) -> Result<Found> {
    let mut search = Search {
        eval,
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
        let (float, at) = match strategy {
            Strategy::Bisect => search.bisect(&ranked)?,
            Strategy::Greedy => search.greedy(&ranked, full)?,
        };
        if goal.met_by(&at) {
            search.give_back(&ranked, float, at)?
        } else {
            (float, at)
        }
    };
    let mut check = eval.check_score(&float)?;
    let mut notes = vec![];
    let mut check_when_tuning_met = None;
    if goal.met_by(&best) && check.is_some_and(|c| !goal.met_by(&c)) {
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
                "the check samples miss the goal ({missed:.5}) where the tuning samples meet it, even with every candidate node in float; the written model is the last one tried"
            ),
        });
    }
    if check.is_none() {
        notes.push("no check set (--check-fraction 0): the goal was judged on the samples the search tuned on".into());
    }
    progress.finish();
    Ok(Found {
        float,
        score: best,
        check,
        full,
        full_check,
        check_when_tuning_met,
        notes,
        alone: ranked,
        variants: search.variants,
    })
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
pub(crate) const GREEDY_CANDIDATES: usize = 4;

/// One search's evaluator, goal and count of variants measured.
struct Search<'a> {
    eval: &'a dyn Variants,
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

    /// Every candidate with what leaving it alone in float scores: the leading ones first,
    /// then best first.
    fn rank(&mut self) -> Result<Vec<(usize, f64)>> {
        let mut ranked = vec![];
        for n in self.eval.candidates() {
            self.progress
                .status(format!("ranking {}", self.eval.label(n)));
            let s = self.score(&BTreeSet::from([n]))?;
            ranked.push((n, self.goal.value(&s)));
        }
        let leading = self.eval.leading();
        ranked.sort_by(|a, b| {
            leading
                .contains(&b.0)
                .cmp(&leading.contains(&a.0))
                .then(b.1.total_cmp(&a.1))
        });
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

    /// Gives back to reduced precision each node of `float` the goal does not need, the least
    /// helpful (by `ranked`) first.
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
                .status(format!("trying {} without it", self.eval.label(n)));
            let s = self.score(&fewer)?;
            if self.goal.met_by(&s) {
                (float, best) = (fewer, s);
            }
        }
        Ok((float, best))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;
    use std::cell::Cell;

    /// Four candidates, each costing the cosine its `damage` unless left in float; `leading`
    /// leads the ranking; the check samples see `check_extra` more damage from node 1.
    struct Fake {
        damage: [f64; 4],
        leading: BTreeSet<usize>,
        check_extra: f64,
        scored: Cell<usize>,
    }

    impl Fake {
        fn cosine(&self, float: &BTreeSet<usize>, extra: f64) -> Score {
            let lost: f64 = (0..4)
                .filter(|n| !float.contains(n))
                .map(|n| self.damage[n] + if n == 1 { extra } else { 0.0 })
                .sum();
            Score {
                cosine: 1.0 - lost,
                cosine_interval: [1.0 - lost; 2],
                top1_agreement_pct: None,
                top1_agreement_interval: None,
                mae: lost,
                samples: 8,
            }
        }
    }

    impl Variants for Fake {
        fn candidates(&self) -> Vec<usize> {
            (0..4).collect()
        }
        fn score(&self, float: &BTreeSet<usize>) -> Result<Score> {
            self.scored.set(self.scored.get() + 1);
            Ok(self.cosine(float, 0.0))
        }
        fn check_score(&self, float: &BTreeSet<usize>) -> Result<Option<Score>> {
            Ok(Some(self.cosine(float, self.check_extra)))
        }
        fn label(&self, node: usize) -> String {
            format!("n{node}")
        }
        fn share(&self, float: &BTreeSet<usize>) -> Option<f64> {
            Some(1.0 - float.len() as f64 / 4.0)
        }
        fn sample_use(&self) -> SampleUse {
            SampleUse::default()
        }
        fn leading(&self) -> BTreeSet<usize> {
            self.leading.clone()
        }
    }

    fn fake(leading: &[usize], check_extra: f64) -> Fake {
        Fake {
            damage: [0.002, 0.0, 0.02, 0.0005],
            leading: leading.iter().copied().collect(),
            check_extra,
            scored: Cell::new(0),
        }
    }

    #[test]
    fn both_strategies_find_the_fewest_nodes_and_count_every_variant() {
        for strategy in [Strategy::Greedy, Strategy::Bisect] {
            let f = fake(&[], 0.0);
            let found = find(&f, Goal::Cosine(0.999), strategy, &NoProgress).unwrap();
            assert_eq!(found.float, BTreeSet::from([0, 2]), "{strategy:?}");
            assert!(found.met(&Goal::Cosine(0.999)));
            assert!(found.notes.is_empty(), "{:?}", found.notes);
            assert_eq!(found.variants, f.scored.get(), "{strategy:?}");
            // Ranked by what each recovers alone: node 2 first.
            assert_eq!(found.alone[0].0, 2);
        }
    }

    #[test]
    fn a_leading_node_ranks_first_whatever_it_recovers_alone() {
        let f = fake(&[3], 0.0);
        let found = find(&f, Goal::Cosine(0.999), Strategy::Bisect, &NoProgress).unwrap();
        assert_eq!(found.alone[0].0, 3);
        assert_eq!(found.alone[1].0, 2);
        // Bisection takes prefixes of the ranking, the give back drops what the goal needs not.
        assert_eq!(found.float, BTreeSet::from([0, 2]));
    }

    #[test]
    fn a_check_that_misses_makes_the_search_go_on_and_says_so() {
        let f = fake(&[], 0.01);
        let found = find(&f, Goal::Cosine(0.999), Strategy::Greedy, &NoProgress).unwrap();
        assert!(found.float.contains(&1), "{:?}", found.float);
        assert!(found.met(&Goal::Cosine(0.999)));
        assert!(found.check_when_tuning_met.is_some());
        assert!(
            found.notes[0].contains("check samples missed"),
            "{:?}",
            found.notes
        );
    }
}
