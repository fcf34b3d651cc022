//! The resampling kernels and their fixed-point weights, as PIL computes them.

/// Fixed-point precision of the weights (PIL: 32 - 8 - 2 bits).
pub(super) const PRECISION_BITS: u32 = 22;

/// The resampling kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Interpolation {
    /// Triangle kernel, support 1 (PIL BILINEAR, torchvision's default).
    Bilinear,
    /// Cubic kernel with a = -0.5, support 2 (PIL BICUBIC).
    Bicubic,
}

impl Interpolation {
    pub(super) fn support(self) -> f64 {
        match self {
            Interpolation::Bilinear => 1.0,
            Interpolation::Bicubic => 2.0,
        }
    }

    pub(super) fn weight(self, x: f64) -> f64 {
        let x = x.abs();
        match self {
            Interpolation::Bilinear => (1.0 - x).max(0.0),
            Interpolation::Bicubic => {
                let a = -0.5;
                if x < 1.0 {
                    ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
                } else if x < 2.0 {
                    (((x - 5.0) * x + 8.0) * x - 4.0) * a
                } else {
                    0.0
                }
            }
        }
    }
}

/// Fixed-point weights of one axis: for each output index, the first input index and weights.
pub(super) struct AxisWeights {
    pub(super) starts: Vec<usize>,
    pub(super) taps: usize,
    /// `starts.len() * taps` weights, zero-padded past each window.
    pub(super) weights: Vec<i32>,
}

/// Weights for output indices `first..first+count` of an axis resized from `in_size` to
/// `out_size`. Compiled for several instruction sets and picked at run time (the same
/// arithmetic on wider vectors: the bits do not change).
#[multiversion::multiversion(targets("x86_64+avx2+fma", "x86_64+sse4.1"))]
pub(super) fn axis_weights(
    kind: Interpolation,
    in_size: usize,
    out_size: usize,
    first: usize,
    count: usize,
) -> AxisWeights {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = kind.support() * filterscale;
    let taps = support.ceil() as usize * 2 + 1;
    let mut starts = Vec::with_capacity(count);
    let mut weights = vec![0i32; count * taps];
    let mut w = vec![0f64; taps];
    for (i, out) in (first..first + count).enumerate() {
        let center = (out as f64 + 0.5) * scale;
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = (((center + support + 0.5) as i64).min(in_size as i64) as usize).max(xmin);
        let n = (xmax - xmin).min(taps);
        let w = &mut w[..n];
        for (x, wx) in w.iter_mut().enumerate() {
            *wx = kind.weight((x as f64 + xmin as f64 - center + 0.5) / filterscale);
        }
        // Summed in order, apart from the loop above so that it can run on vectors.
        let total = w.iter().fold(0.0, |t, &wx| t + wx);
        for (k, &wx) in weights[i * taps..i * taps + n].iter_mut().zip(w.iter()) {
            let v = if total != 0.0 { wx / total } else { 0.0 };
            let fixed = v * (1i64 << PRECISION_BITS) as f64;
            *k = if fixed < 0.0 {
                (fixed - 0.5) as i32
            } else {
                (fixed + 0.5) as i32
            };
        }
        starts.push(xmin);
    }
    AxisWeights {
        starts,
        taps,
        weights,
    }
}

impl AxisWeights {
    /// The same weights with every window narrowed to its span of non-zero weights and the
    /// tap count cut to the widest span. The sums are the same to the bit (a zero weight adds
    /// nothing), and fewer taps are less work: PIL sizes every window for the kernel's full
    /// support (`2·ceil(support)+1`), which for a bilinear shrink of 1.5× is 5 taps of which
    /// at most 3 are non-zero.
    pub(super) fn trimmed(self) -> AxisWeights {
        let taps = self.taps;
        // Each window's non-zero span as input indices; an all-zero window keeps its start.
        let mut spans: Vec<(usize, usize)> = self
            .weights
            .chunks_exact(taps)
            .zip(&self.starts)
            .map(|(k, &start)| match k.iter().position(|&w| w != 0) {
                Some(first) => {
                    let last = k.iter().rposition(|&w| w != 0).unwrap_or(first);
                    (start + first, start + last + 1)
                }
                None => (start, start),
            })
            .collect();
        // Starts must not decrease (the row kernels find the windows that run past the right
        // edge by bisection); a weight of exactly zero inside the kernel (the cubic is zero at
        // 1 and 2) can trim one window's start past the next one's.
        for i in (0..spans.len().saturating_sub(1)).rev() {
            spans[i].0 = spans[i].0.min(spans[i + 1].0);
        }
        // The minimum only lowers a start, so every span still has lo <= hi.
        let width = spans
            .iter()
            .map(|&(lo, hi)| hi - lo)
            .max()
            .unwrap_or(0)
            .max(1);
        let mut weights = vec![0i32; spans.len() * width];
        for (i, (&(lo, hi), &start)) in spans.iter().zip(&self.starts).enumerate() {
            for x in lo..hi {
                // lo can sit before the original start only through the suffix minimum, and
                // then only over weights that are zero.
                if let Some(t) = x.checked_sub(start).filter(|&t| t < taps) {
                    weights[i * width + x - lo] = self.weights[i * taps + t];
                }
            }
        }
        AxisWeights {
            starts: spans.iter().map(|&(lo, _)| lo).collect(),
            taps: width,
            weights,
        }
    }
}

/// The 8-bit value of an accumulator (rounding already added), clamped as PIL does.
#[inline]
pub(super) fn clip8(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}
