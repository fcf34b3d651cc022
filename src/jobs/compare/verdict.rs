//! What fails a comparison after its report is shown: an all-NaN output, and (with
//! `--fail-below`) equality, top-1 agreement or non-finite disagreement below the threshold.

use super::pair::CompareReport;

/// A comparison that must fail the run after its report is shown.
#[derive(Debug, thiserror::Error)]
pub enum Verdict {
    /// An output of one side is all NaN: that run is broken.
    #[error(
        "{file}: output '{output}' of {side} is all NaN: that run is broken (a float16 overflow gives this; compare --layerwise names the first tensor that diverges)"
    )]
    AllNan {
        /// The output.
        output: String,
        /// The side's label (`A`, `B`, …).
        side: String,
        /// The side's file.
        file: String,
    },
    /// An output disagrees in NaN or ±Inf values, so its cosine is NaN: below any threshold.
    #[error("{}", self.said(None))]
    NonFinite {
        /// The output.
        output: String,
        /// Elements where the two disagree and either is NaN or ±Inf.
        mismatches: usize,
        /// NaN count in A.
        nan_a: usize,
        /// NaN count in B.
        nan_b: usize,
        /// ±Inf count in A.
        inf_a: usize,
        /// ±Inf count in B.
        inf_b: usize,
        /// The threshold, percent.
        threshold: f64,
    },
    /// An output's equality or top-1 agreement is below the threshold asked for.
    #[error("{}", self.said(None))]
    Below {
        /// The output.
        output: String,
        /// `equality` or `top-1 agreement`.
        what: &'static str,
        /// The measured percentage.
        pct: f64,
        /// The threshold, percent.
        threshold: f64,
    },
}

impl Verdict {
    /// The verdict's message, its threshold named with the flag that set it when `flag` is given
    /// (`below --fail-below 99` rather than `below 99`).
    pub fn said(&self, flag: Option<&str>) -> String {
        let below = |threshold: &f64| match flag {
            Some(flag) => format!("below {flag} {threshold}"),
            None => format!("below {threshold}"),
        };
        match self {
            Verdict::AllNan { .. } => self.to_string(),
            Verdict::NonFinite {
                output,
                mismatches,
                nan_a,
                nan_b,
                inf_a,
                inf_b,
                threshold,
            } => format!(
                "output '{output}': cosine NaN ({mismatches} elements NaN or Inf on one side only, NaN A/B {nan_a}/{nan_b}, Inf A/B {inf_a}/{inf_b}) is {}",
                below(threshold)
            ),
            Verdict::Below {
                output,
                what,
                pct,
                threshold,
            } => format!("output '{output}': {what} {pct:.2}% is {}", below(threshold)),
        }
    }
}

/// What makes a comparison fail: all-NaN outputs, and (with `fail_below`) any output's
/// equality % or top-1 agreement % below it, or NaN or ±Inf values where the sides disagree
/// (a NaN cosine passes no threshold).
pub fn verdict(r: &CompareReport, fail_below: Option<f64>) -> Result<(), Verdict> {
    for o in &r.outputs {
        for (side, a) in r.sides.iter().zip([true, false]) {
            if o.all_nan(a) {
                return Err(Verdict::AllNan {
                    output: o.name.clone(),
                    side: side.label.clone(),
                    file: side.source.clone(),
                });
            }
        }
    }
    let Some(threshold) = fail_below else {
        return Ok(());
    };
    for o in &r.outputs {
        let below = |what, pct: f64| {
            (pct < threshold).then(|| Verdict::Below {
                output: o.name.clone(),
                what,
                pct,
                threshold,
            })
        };
        let c = &o.closeness;
        if c.non_finite_mismatches > 0 {
            return Err(Verdict::NonFinite {
                output: o.name.clone(),
                mismatches: c.non_finite_mismatches,
                nan_a: c.nan_a,
                nan_b: c.nan_b,
                inf_a: c.inf_a,
                inf_b: c.inf_b,
                threshold,
            });
        }
        let topk = o.topk.as_ref().map(|k| k.top1_agreement_pct);
        if let Some(v) = below("equality", o.closeness.equal_pct)
            .or_else(|| topk.and_then(|pct| below("top-1 agreement", pct)))
        {
            return Err(v);
        }
    }
    Ok(())
}
