//! The descent itself, on one layer's weights in channel-major form and the Gram matrices of
//! its input patches; see the parent module for the objective.

use anyhow::Result;
use rayon::prelude::*;
use tract_onnx::prelude::tract_ndarray::{s, Array2, ArrayView2};

/// The most coordinate-descent sweeps over a channel's weights; the descent stops earlier once
/// a sweep flips none.
pub(crate) const MAX_SWEEPS: usize = 8;

/// One layer's rounding problem, channel-major: channel `o`'s weights are
/// `weights[o * fan_in..(o + 1) * fan_in]`, in the order of its input patches.
pub(super) struct Problem<'a> {
    /// The float weights.
    pub(super) weights: &'a [f32],
    /// One scale per channel.
    pub(super) scales: &'a [f32],
    /// The nearest int8 values (the start).
    pub(super) nearest: &'a [i8],
    /// One Gram matrix (`fan_in × fan_in`) per group; the channels are split evenly.
    pub(super) grams: &'a [Array2<f64>],
}

/// What the descent chose and the layer's errors before and after.
#[derive(Debug)]
pub(super) struct Solution {
    /// The chosen int8 values, channel-major.
    pub(super) values: Vec<i8>,
    /// `Σ δᵀHδ` at nearest rounding.
    pub(super) nearest_error: f64,
    /// The same at the chosen values (never higher).
    pub(super) adaptive_error: f64,
    /// `Σ wᵀHw`: the float outputs' squared norm over the patches.
    pub(super) reference: f64,
    /// Values that differ from nearest.
    pub(super) changed: usize,
}

/// `a · b`, its rows computed in parallel blocks.
fn par_dot(a: ArrayView2<f64>, b: ArrayView2<f64>) -> Array2<f64> {
    let rows = a.nrows();
    let chunk = rows.div_ceil(rayon::current_num_threads() * 2).max(32);
    let starts: Vec<usize> = (0..rows).step_by(chunk).collect();
    let blocks: Vec<(usize, Array2<f64>)> = starts
        .into_par_iter()
        .map(|r0| (r0, a.slice(s![r0..(r0 + chunk).min(rows), ..]).dot(&b)))
        .collect();
    let mut out = Array2::zeros((rows, b.ncols()));
    for (r0, block) in blocks {
        out.slice_mut(s![r0..r0 + block.nrows(), ..]).assign(&block);
    }
    out
}

/// `Σ p pᵀ` over the `count` patches (rows of `patches`, `fan_in` long), exactly symmetric.
pub(super) fn gram(patches: &[f64], count: usize, fan_in: usize) -> Result<Array2<f64>> {
    let p = ArrayView2::from_shape((count, fan_in), patches)?;
    let mut h = par_dot(p.t(), p);
    for i in 0..fan_in {
        for j in 0..i {
            h[[i, j]] = h[[j, i]];
        }
    }
    Ok(h)
}

/// The int8 value other than `q` that rounds `w / s` down or up, if there is one: none for a
/// value on an integer or at the edge of the range (`|w / s| ≥ 127` stays at ±127).
fn other_candidate(w: f32, s: f32, q: i8) -> Option<i8> {
    let r = w / s;
    if r.is_nan() || r.abs() >= 127.0 {
        return None;
    }
    let (lo, hi, q) = (r.floor(), r.ceil(), q as f32);
    if lo == hi {
        None
    } else if q == lo {
        Some(hi as i8)
    } else if q == hi {
        Some(lo as i8)
    } else {
        None
    }
}

/// Coordinate descent on one channel from its current values `q`: flips each weight to its
/// other candidate when that lowers `δᵀHδ`, keeping `delta` (`s·q − w`) and `g` (`H·δ`)
/// current.
fn descend(h: &Array2<f64>, w: &[f32], s: f32, q: &mut [i8], delta: &mut [f64], g: &mut [f64]) {
    let mut other: Vec<Option<i8>> = (0..w.len())
        .map(|i| other_candidate(w[i], s, q[i]))
        .collect();
    let step = s as f64;
    for _ in 0..MAX_SWEEPS {
        let mut flipped = false;
        for i in 0..w.len() {
            let Some(to) = other[i] else { continue };
            let d = (to as f64 - q[i] as f64) * step;
            if 2.0 * d * g[i] + d * d * h[[i, i]] < 0.0 {
                other[i] = Some(q[i]);
                q[i] = to;
                delta[i] += d;
                for (gj, hj) in g.iter_mut().zip(h.row(i)) {
                    *gj += d * hj;
                }
                flipped = true;
            }
        }
        if !flipped {
            break;
        }
    }
}

/// Row-wise dot products of two `rows × n` matrices (`b` by its elements, row-major).
fn row_dots(a: &[f64], b: impl Iterator<Item = f64>, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; a.len() / n];
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        out[i / n] += x * y;
    }
    out
}

/// Solves `p` group by group: each channel descends from nearest rounding; a channel whose
/// error (recomputed from its chosen values) came out above nearest's keeps nearest.
pub(super) fn solve(p: &Problem) -> Result<Solution> {
    let channels = p.scales.len();
    let fan_in = p.weights.len() / channels.max(1);
    let per_group = channels / p.grams.len().max(1);
    let mut values = p.nearest.to_vec();
    let (mut nearest_error, mut adaptive_error, mut reference) = (0.0, 0.0, 0.0);
    for (k, h) in p.grams.iter().enumerate() {
        let span = k * per_group * fan_in..(k + 1) * per_group * fan_in;
        let (w, q0) = (&p.weights[span.clone()], &p.nearest[span.clone()]);
        let scales = &p.scales[k * per_group..(k + 1) * per_group];
        let wide: Vec<f64> = w.iter().map(|&v| v as f64).collect();
        let mut delta: Vec<f64> = q0
            .iter()
            .enumerate()
            .map(|(i, &q)| scales[i / fan_in] as f64 * q as f64 - wide[i])
            .collect();
        let shape = (per_group, fan_in);
        let hw = par_dot(ArrayView2::from_shape(shape, &wide)?, h.view());
        let mut g: Vec<f64> = par_dot(ArrayView2::from_shape(shape, &delta)?, h.view())
            .iter()
            .copied()
            .collect();
        let near = row_dots(&delta, g.iter().copied(), fan_in);
        let q = &mut values[span];
        q.par_chunks_mut(fan_in)
            .zip(delta.par_chunks_mut(fan_in))
            .zip(g.par_chunks_mut(fan_in))
            .enumerate()
            .for_each(|(o, ((q, d), g))| {
                descend(h, &w[o * fan_in..(o + 1) * fan_in], scales[o], q, d, g)
            });
        let after = par_dot(ArrayView2::from_shape(shape, &delta)?, h.view());
        let adaptive = row_dots(&delta, after.iter().copied(), fan_in);
        for o in 0..per_group {
            let chosen = if adaptive[o] <= near[o] {
                adaptive[o]
            } else {
                q[o * fan_in..(o + 1) * fan_in].copy_from_slice(&q0[o * fan_in..(o + 1) * fan_in]);
                near[o]
            };
            nearest_error += near[o];
            adaptive_error += chosen;
        }
        reference += row_dots(&wide, hw.iter().copied(), fan_in)
            .iter()
            .sum::<f64>();
    }
    let changed = values.iter().zip(p.nearest).filter(|(a, b)| a != b).count();
    Ok(Solution {
        values,
        nearest_error,
        adaptive_error,
        reference,
        changed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::rewrite::qdq::{quantize_weights, WeightClip};
    use crate::onnx::test_models::deterministic_weights;

    /// A random dense layer (`channels × fan_in`) read by `rows` random inputs whose first two
    /// columns are nearly the same: weights, scales, nearest values, inputs.
    fn dense(
        seed: u64,
        rows: usize,
        fan_in: usize,
        channels: usize,
    ) -> (Vec<f32>, Vec<f32>, Vec<i8>, Vec<f32>) {
        let mut x = deterministic_weights(seed, rows * fan_in, 1.0);
        for r in x.chunks_mut(fan_in) {
            r[1] = 0.9 * r[0] + 0.1 * r[1];
        }
        let w = deterministic_weights(seed + 1000, channels * fan_in, 0.5);
        let (q, s) = quantize_weights(&w, &[channels as i64, fan_in as i64], 0, WeightClip::Max);
        (w, s, q, x)
    }

    /// `Σ |(s·q − w) x|²` over the rows of `x`, computed from the outputs directly.
    fn output_error(w: &[f32], s: &[f32], q: &[i8], x: &[f32], fan_in: usize) -> f64 {
        let mut e = 0.0;
        for row in x.chunks(fan_in) {
            for (o, (wc, qc)) in w.chunks(fan_in).zip(q.chunks(fan_in)).enumerate() {
                let y: f64 = (0..fan_in)
                    .map(|i| (s[o] as f64 * qc[i] as f64 - wc[i] as f64) * row[i] as f64)
                    .sum();
                e += y * y;
            }
        }
        e
    }

    fn solve_dense(w: &[f32], s: &[f32], q: &[i8], x: &[f32], fan_in: usize) -> Solution {
        let wide: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let h = gram(&wide, x.len() / fan_in, fan_in).unwrap();
        solve(&Problem {
            weights: w,
            scales: s,
            nearest: q,
            grams: &[h],
        })
        .unwrap()
    }

    /// On random layers the descent never raises the error, lowers it on most, and the errors
    /// it reports are the outputs' own (through the Gram matrix, nothing lost).
    #[test]
    fn descent_never_raises_the_error_it_reports_truly() {
        let mut lowered = 0;
        for seed in 0..20 {
            let (w, s, q, x) = dense(seed, 40, 11, 5);
            let sol = solve_dense(&w, &s, &q, &x, 11);
            assert!(
                sol.adaptive_error <= sol.nearest_error,
                "seed {seed}: {sol:?}"
            );
            let near = output_error(&w, &s, &q, &x, 11);
            let adaptive = output_error(&w, &s, &sol.values, &x, 11);
            assert!(
                (near - sol.nearest_error).abs() <= 1e-9 * near,
                "{near} vs {sol:?}"
            );
            assert!(
                (adaptive - sol.adaptive_error).abs() <= 1e-9 * near,
                "{adaptive} vs {sol:?}"
            );
            let changed = sol.values.iter().zip(&q).filter(|(a, b)| a != b).count();
            assert_eq!(changed, sol.changed);
            lowered += usize::from(sol.adaptive_error < 0.95 * sol.nearest_error);
        }
        assert!(lowered >= 15, "only {lowered} of 20 layers improved");
    }

    /// Where the descent ends, no single weight's flip to its other candidate lowers the error
    /// (checked on the outputs directly).
    #[test]
    fn the_descent_ends_in_a_local_minimum() {
        for seed in 0..10 {
            let (w, s, q, x) = dense(seed + 50, 30, 6, 3);
            let sol = solve_dense(&w, &s, &q, &x, 6);
            let best = output_error(&w, &s, &sol.values, &x, 6);
            for i in 0..sol.values.len() {
                let Some(other) = other_candidate(w[i], s[i / 6], sol.values[i]) else {
                    continue;
                };
                let mut v = sol.values.clone();
                v[i] = other;
                let flipped = output_error(&w, &s, &v, &x, 6);
                assert!(
                    flipped >= best * (1.0 - 1e-12),
                    "seed {seed} weight {i}: {flipped} < {best}"
                );
            }
        }
    }

    #[test]
    fn the_other_candidate_is_the_other_side_within_range() {
        assert_eq!(other_candidate(2.6, 1.0, 3), Some(2));
        assert_eq!(other_candidate(-2.6, 1.0, -3), Some(-2));
        assert_eq!(other_candidate(2.4, 1.0, 2), Some(3));
        assert_eq!(other_candidate(3.0, 1.0, 3), None);
        assert_eq!(other_candidate(126.7, 1.0, 127), Some(126));
        assert_eq!(other_candidate(127.0, 1.0, 127), None);
        assert_eq!(other_candidate(-130.0, 1.0, -127), None);
        assert_eq!(other_candidate(f32::NAN, 1.0, 0), None);
    }
}
