//! The input vectors ("patches") one layer's weights multiply, taken from captured activations:
//! for a 2-D convolution the `Cin/group × kh × kw` window under each output position, for each
//! group ("im2col", zero padding); for a dense layer (MatMul, Gemm) each row of the input's last
//! axis. Adaptive rounding builds each layer's error from them.
//!
//! Pure arithmetic on slices: the caller reads the node's attributes and the captured tensors.

use anyhow::{bail, Result};

/// Explicit padding or ONNX's `auto_pad` modes that depend on the input's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Padding {
    /// `[top, left, bottom, right]` (ONNX `pads` of a 2-D convolution; `auto_pad` NOTSET or
    /// VALID, the latter as zeros).
    Explicit([usize; 4]),
    /// `SAME_UPPER`: output size `ceil(in / stride)`, an odd extra pad at the end.
    SameUpper,
    /// `SAME_LOWER`: the same, the odd extra pad at the start.
    SameLower,
}

/// How a 2-D convolution reads its input `[N, Cin, H, W]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Conv2d {
    /// Groups (`Cin / in_per_group`); a depthwise convolution has one per channel.
    pub group: usize,
    /// Input channels each group reads (the weight's dim 1).
    pub(crate) in_per_group: usize,
    /// Kernel `[kh, kw]` (the weight's dims 2 and 3).
    pub kernel: [usize; 2],
    /// Strides `[sh, sw]`.
    pub(crate) strides: [usize; 2],
    /// Dilations `[dh, dw]`.
    pub(crate) dilations: [usize; 2],
    /// Padding.
    pub padding: Padding,
}

impl Conv2d {
    /// The pads `[top, left, bottom, right]` for an input of height and width `hw`.
    pub fn pads(&self, hw: [usize; 2]) -> [usize; 4] {
        let Padding::Explicit(pads) = self.padding else {
            let mut pads = [0; 4];
            for a in 0..2 {
                let out = hw[a].div_ceil(self.strides[a]);
                let need = (out.saturating_sub(1) * self.strides[a] + self.reach(a) + 1)
                    .saturating_sub(hw[a]);
                let small = need / 2;
                let (begin, end) = match self.padding {
                    Padding::SameUpper => (small, need - small),
                    _ => (need - small, small),
                };
                (pads[a], pads[a + 2]) = (begin, end);
            }
            return pads;
        };
        pads
    }

    /// How far the kernel reaches beyond its first tap along axis `a`: `(k - 1) · dilation`.
    fn reach(&self, a: usize) -> usize {
        (self.kernel[a] - 1) * self.dilations[a]
    }

    /// The output height and width for an input of height and width `hw`.
    pub(crate) fn output_hw(&self, hw: [usize; 2]) -> [usize; 2] {
        let pads = self.pads(hw);
        let mut out = [0; 2];
        for a in 0..2 {
            let padded = hw[a] + pads[a] + pads[a + 2];
            out[a] = match padded.checked_sub(self.reach(a)) {
                Some(room) if room > 0 => (room - 1) / self.strides[a] + 1,
                _ => 0,
            };
        }
        out
    }
}

/// How a layer reads its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayerInput {
    /// A 2-D convolution.
    Conv2d(Conv2d),
    /// A dense layer: each row of the input's last axis (`fan_in` long) is one patch.
    Dense {
        /// The input's last dim (the weight's `K`).
        fan_in: usize,
    },
}

impl LayerInput {
    /// Groups of output channels, each with its own input patches (1 for a dense layer).
    pub fn groups(&self) -> usize {
        match self {
            LayerInput::Conv2d(c) => c.group,
            LayerInput::Dense { .. } => 1,
        }
    }

    /// The length of one patch: the weights of one output channel.
    pub(crate) fn fan_in(&self) -> usize {
        match self {
            LayerInput::Conv2d(c) => c.in_per_group * c.kernel[0] * c.kernel[1],
            LayerInput::Dense { fan_in } => *fan_in,
        }
    }

    /// The number of patch positions (per group) an input of `shape` holds; an error if the
    /// layer cannot read that shape.
    pub(crate) fn positions(&self, shape: &[usize]) -> Result<usize> {
        match self {
            LayerInput::Conv2d(c) => {
                let &[n, cin, h, w] = shape else {
                    bail!("a 2-D convolution reads [N, C, H, W], the input has shape {shape:?}");
                };
                if cin != c.group * c.in_per_group {
                    bail!(
                        "the input has {cin} channels, the weights read {} groups of {}",
                        c.group,
                        c.in_per_group
                    );
                }
                let [oh, ow] = c.output_hw([h, w]);
                Ok(n * oh * ow)
            }
            LayerInput::Dense { fan_in } => match shape.split_last() {
                Some((&k, rows)) if k == *fan_in => Ok(rows.iter().product()),
                _ => bail!("the input has shape {shape:?}, the weights read rows of {fan_in}"),
            },
        }
    }

    /// Writes the patch of `group` at `position` (as [`positions`](Self::positions) counts
    /// them: batch, then output row, then output column) of `data` (shape `shape`) into `out`
    /// (`fan_in` long), in the order of the weights of one output channel.
    pub(crate) fn fill(
        &self,
        data: &[f32],
        shape: &[usize],
        position: usize,
        group: usize,
        out: &mut [f64],
    ) {
        match self {
            LayerInput::Dense { fan_in } => {
                let row = &data[position * fan_in..(position + 1) * fan_in];
                for (o, &v) in out.iter_mut().zip(row) {
                    *o = v as f64;
                }
            }
            LayerInput::Conv2d(c) => {
                let (cin, h, w) = (shape[1], shape[2], shape[3]);
                let pads = c.pads([h, w]);
                let [oh, ow] = c.output_hw([h, w]);
                let (n, y, x) = (position / (oh * ow), position / ow % oh, position % ow);
                let [kh, kw] = c.kernel;
                for ch in 0..c.in_per_group {
                    let plane = (n * cin + group * c.in_per_group + ch) * h * w;
                    for i in 0..kh {
                        let iy = (y * c.strides[0] + i * c.dilations[0]).checked_sub(pads[0]);
                        for j in 0..kw {
                            let ix = (x * c.strides[1] + j * c.dilations[1]).checked_sub(pads[1]);
                            out[(ch * kh + i) * kw + j] = match (iy, ix) {
                                (Some(iy), Some(ix)) if iy < h && ix < w => {
                                    data[plane + iy * w + ix] as f64
                                }
                                _ => 0.0,
                            };
                        }
                    }
                }
            }
        }
    }
}

/// Patches sampled from a layer's captured inputs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Patches {
    /// Patches per group.
    pub count: usize,
    /// Per group, `count × fan_in` values, row-major (one patch a row).
    pub groups: Vec<Vec<f64>>,
}

/// At most `cap` patch positions of `batches` (each `(data, shape)`; positions counted over all
/// of them in order), spread by an even stride when there are more (deterministic), each
/// position's patch for every group.
pub(crate) fn sample_patches(
    layer: &LayerInput,
    batches: &[(&[f32], &[usize])],
    cap: usize,
) -> Result<Patches> {
    let mut counts = Vec::with_capacity(batches.len());
    for (data, shape) in batches {
        if data.len() != shape.iter().product::<usize>() {
            bail!(
                "a captured input has {} values for shape {shape:?}",
                data.len()
            );
        }
        counts.push(layer.positions(shape)?);
    }
    let total: usize = counts.iter().sum();
    if total == 0 || cap == 0 {
        bail!(
            "the captured inputs hold no patch (shapes {:?})",
            batches.iter().map(|b| b.1).collect::<Vec<_>>()
        );
    }
    let count = total.min(cap);
    let fan_in = layer.fan_in();
    let mut groups = vec![vec![0f64; count * fan_in]; layer.groups()];
    let (mut tensor, mut start) = (0, 0);
    for k in 0..count {
        let global = (k as u128 * total as u128 / count as u128) as usize;
        while global >= start + counts[tensor] {
            start += counts[tensor];
            tensor += 1;
        }
        let (data, shape) = batches[tensor];
        for (g, values) in groups.iter_mut().enumerate() {
            layer.fill(
                data,
                shape,
                global - start,
                g,
                &mut values[k * fan_in..(k + 1) * fan_in],
            );
        }
    }
    Ok(Patches { count, groups })
}

/// A direct 2-D convolution (no bias), the reference the tests hold the patches to.
#[cfg(test)]
pub(crate) fn naive_conv(
    c: &Conv2d,
    x: &[f32],
    shape: &[usize],
    w: &[f32],
    cout: usize,
) -> Vec<f64> {
    let (n, h, wd) = (shape[0], shape[2], shape[3]);
    let pads = c.pads([h, wd]);
    let [oh, ow] = c.output_hw([h, wd]);
    let per_group = cout / c.group;
    let [kh, kw] = c.kernel;
    let mut y = vec![0f64; n * cout * oh * ow];
    for b in 0..n {
        for o in 0..cout {
            let g = o / per_group;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = 0f64;
                    for ch in 0..c.in_per_group {
                        for i in 0..kh {
                            for j in 0..kw {
                                let iy = (oy * c.strides[0] + i * c.dilations[0]) as isize
                                    - pads[0] as isize;
                                let ix = (ox * c.strides[1] + j * c.dilations[1]) as isize
                                    - pads[1] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xi = ((b * shape[1] + g * c.in_per_group + ch) * h
                                    + iy as usize)
                                    * wd
                                    + ix as usize;
                                let wi = ((o * c.in_per_group + ch) * kh + i) * kw + j;
                                acc += x[xi] as f64 * w[wi] as f64;
                            }
                        }
                    }
                    y[((b * cout + o) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(seed: u64, n: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// Every patch times the weights of every output channel of its group is the direct
    /// convolution's output at that position: padding (uneven, and SAME), strides, dilations
    /// and groups all land where a convolution puts them.
    #[test]
    fn conv_patches_times_weights_are_the_convolution() {
        let shape = [2usize, 4, 7, 6];
        let x = noise(1, shape.iter().product());
        let cases = [
            (
                2,
                [3, 3],
                [2, 1],
                [1, 2],
                Padding::Explicit([1, 0, 2, 1]),
                6,
            ),
            (1, [2, 3], [1, 2], [1, 1], Padding::SameUpper, 3),
            (4, [3, 3], [2, 2], [1, 1], Padding::SameLower, 4),
            (4, [1, 1], [1, 1], [1, 1], Padding::Explicit([0; 4]), 8),
        ];
        for (group, kernel, strides, dilations, padding, cout) in cases {
            let c = Conv2d {
                group,
                in_per_group: 4 / group,
                kernel,
                strides,
                dilations,
                padding,
            };
            let layer = LayerInput::Conv2d(c);
            let fan_in = layer.fan_in();
            let w = noise(7, cout * fan_in);
            let want = naive_conv(&c, &x, &shape, &w, cout);
            let p = sample_patches(&layer, &[(&x, &shape)], usize::MAX).unwrap();
            let [oh, ow] = c.output_hw([7, 6]);
            assert_eq!(p.count, 2 * oh * ow);
            assert_eq!(want.len(), 2 * cout * oh * ow);
            let per_group = cout / group;
            for pos in 0..p.count {
                let (b, rest) = (pos / (oh * ow), pos % (oh * ow));
                for o in 0..cout {
                    let patch = &p.groups[o / per_group][pos * fan_in..(pos + 1) * fan_in];
                    let got: f64 = patch
                        .iter()
                        .zip(&w[o * fan_in..])
                        .map(|(p, &w)| p * w as f64)
                        .sum();
                    let expect = want[(b * cout + o) * oh * ow + rest];
                    assert!(
                        (got - expect).abs() < 1e-9,
                        "{c:?} pos {pos} o {o}: {got} vs {expect}"
                    );
                }
            }
        }
        let same = Conv2d {
            group: 1,
            in_per_group: 4,
            kernel: [3, 3],
            strides: [2, 2],
            dilations: [1, 1],
            padding: Padding::SameUpper,
        };
        assert_eq!(same.output_hw([7, 6]), [4, 3]);
        assert_eq!(same.pads([7, 6]), [1, 0, 1, 1]);
    }

    /// Dense rows come from all leading axes; a cap keeps evenly spread positions of every
    /// batch, the first always.
    #[test]
    fn dense_rows_and_the_cap() {
        let a: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let b: Vec<f32> = (100..112).map(|v| v as f32).collect();
        let layer = LayerInput::Dense { fan_in: 4 };
        let batches = [(&a[..], &[2usize, 3, 4][..]), (&b[..], &[3usize, 4][..])];
        let all = sample_patches(&layer, &batches, 100).unwrap();
        assert_eq!(all.count, 9);
        assert_eq!(&all.groups[0][20..24], &[20.0, 21.0, 22.0, 23.0]);
        assert_eq!(&all.groups[0][32..36], &[108.0, 109.0, 110.0, 111.0]);
        let three = sample_patches(&layer, &batches, 3).unwrap();
        let firsts: Vec<f64> = three.groups[0].chunks(4).map(|r| r[0]).collect();
        assert_eq!(firsts, [0.0, 12.0, 100.0]);
        let err = sample_patches(&layer, &[(&a[..], &[4usize, 6][..])], 10).unwrap_err();
        assert!(err.to_string().contains("rows of 4"), "{err}");
        let conv = LayerInput::Conv2d(Conv2d {
            group: 1,
            in_per_group: 3,
            kernel: [1, 1],
            strides: [1, 1],
            dilations: [1, 1],
            padding: Padding::Explicit([0; 4]),
        });
        let err = sample_patches(&conv, &[(&a[..], &[1usize, 2, 3, 4][..])], 10).unwrap_err();
        assert!(err.to_string().contains("2 channels"), "{err}");
    }
}
