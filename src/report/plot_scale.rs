//! The axes of the report's plots: a [`Scale`] is a linear, logarithmic or categorical axis
//! fitted to the values drawn on it, with its own ticks, and is its own plotters coordinate.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};

/// One axis: its range in plotted units (log10 of the value on a log axis) and its ticks.
#[derive(Clone, Debug)]
pub(super) struct Scale {
    log: bool,
    lo: f64,
    hi: f64,
    ticks: Vec<(f64, String)>,
}

impl Scale {
    /// Categories `0..n`, the i-th centred on `i + 0.5`.
    pub(super) fn categories(labels: &[String]) -> Scale {
        let ticks = labels
            .iter()
            .enumerate()
            .map(|(i, l)| (i as f64 + 0.5, l.clone()));
        Scale {
            log: false,
            lo: 0.0,
            hi: labels.len().max(1) as f64,
            ticks: ticks.collect(),
        }
    }

    /// An axis for the finite `values`: logarithmic when all are positive and span more than
    /// `log_ratio`, otherwise linear (from zero when `from_zero`).
    pub(super) fn fit(values: &[f64], log_ratio: f64, from_zero: bool) -> Option<Scale> {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        let min = v.iter().copied().reduce(f64::min)?;
        let max = v.iter().copied().reduce(f64::max)?;
        if min > 0.0 && max / min > log_ratio {
            let (l, h) = (min.log10(), max.log10());
            let pad = ((h - l) * 0.06).max(0.05);
            return Some(Scale::log(l - pad, h + pad));
        }
        let (mut lo, mut hi) = if from_zero {
            (min.min(0.0), max.max(0.0))
        } else {
            (min, max)
        };
        let span = hi - lo;
        if span <= f64::EPSILON * hi.abs().max(1.0) {
            let d = if hi.abs() > 0.0 { hi.abs() * 0.1 } else { 1.0 };
            (lo, hi) = (if from_zero && lo == 0.0 { 0.0 } else { lo - d }, hi + d);
        } else {
            hi += span * 0.08;
            if !(from_zero && lo == 0.0) {
                lo -= span * 0.08;
            }
        }
        Some(Scale::linear(lo, hi))
    }

    fn linear(lo: f64, hi: f64) -> Scale {
        let raw = (hi - lo) / 7.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(mag * 10.0);
        let decimals = (-step.log10().floor()).max(0.0) as usize;
        let mut ticks = vec![];
        let mut t = (lo / step).ceil() * step;
        while t <= hi && ticks.len() < 50 {
            ticks.push((
                t,
                format!(
                    "{:.*}",
                    decimals,
                    if t.abs() < step / 2.0 { 0.0 } else { t }
                ),
            ));
            t += step;
        }
        Scale {
            log: false,
            lo,
            hi,
            ticks,
        }
    }

    fn log(lo: f64, hi: f64) -> Scale {
        let decade = |mults: &[f64]| {
            let mut ticks = vec![];
            for k in lo.floor() as i32..=hi.ceil() as i32 {
                for m in mults {
                    let p = m.log10() + k as f64;
                    if (lo..=hi).contains(&p) {
                        let v = m * 10f64.powi(k);
                        ticks.push((p, format!("{:.*}", (-k).max(0) as usize, v)));
                    }
                }
            }
            ticks
        };
        let mut ticks = decade(&[1.0, 2.0, 5.0]);
        if ticks.len() > 10 {
            ticks = decade(&[1.0]);
        }
        Scale {
            log: true,
            lo,
            hi,
            ticks,
        }
    }

    /// Where `v` is drawn (`None` where it cannot be).
    pub(super) fn map(&self, v: f64) -> Option<f64> {
        let p = if self.log {
            (v > 0.0).then(|| v.log10())?
        } else {
            v
        };
        p.is_finite().then_some(p)
    }

    /// The bottom of a bar.
    pub(super) fn base(&self) -> f64 {
        if self.log {
            self.lo
        } else {
            0f64.clamp(self.lo, self.hi)
        }
    }

    /// The tick label at `p`, empty between ticks.
    pub(super) fn label(&self, p: f64) -> String {
        let near = self
            .ticks
            .iter()
            .find(|(t, _)| (t - p).abs() <= (self.hi - self.lo).abs() * 1e-9);
        near.map(|(_, l)| l.clone()).unwrap_or_default()
    }

    /// What the axis title gets: ` (log)` on a log axis.
    pub(super) fn suffix(&self) -> &'static str {
        if self.log {
            " (log)"
        } else {
            ""
        }
    }
}

/// A scale is its own plotters coordinate, so the ticks are exactly [`Scale::ticks`].
impl Ranged for Scale {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = (v - self.lo) / (self.hi - self.lo);
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            vec![]
        } else {
            self.ticks.iter().map(|t| t.0).collect()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degenerate_values_still_fit_an_axis() {
        let s = Scale::fit(&[5.0, 5.0], 10.0, false).unwrap();
        assert!(s.hi > s.lo);
        assert!(Scale::fit(&[f64::NAN], 10.0, true).is_none());
        let z = Scale::fit(&[0.0, 1000.0], 10.0, true).unwrap();
        assert!(!z.log && z.lo == 0.0);
    }
}
