//! Histograms of |x| over a growable range, merged exactly across batches and threads.
//!
//! The range is always a power of two (`2^k`), so growing it is an exact merge of adjacent
//! bins (each doubling folds bins `2i` and `2i+1` into bin `i`) and two histograms with
//! different ranges merge without interpolation, in any order: the result is the same as if
//! every value had been counted into one histogram at the final range.

use multiversion::multiversion;
use rayon::prelude::*;

mod fused;
/// Whether this CPU has a SIMD fused pass (AVX-512 or AVX2, detected once).
fn fused_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        pulp::x86::V4::is_available() || pulp::x86::V3::is_available()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The fused pass (see [`fused`]) on the widest SIMD the CPU has (detected once, at the first call): counts
/// `values` at `range` into `to`, packing the first group if `pack`. NaNs and infinities are
/// counted in the last bin, as by the scalar kernel; the caller takes them back out.
fn count_fused(values: &[f32], range: f32, to: fused::Target, pack: bool) -> fused::Counted {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(simd) = pulp::x86::V4::try_new() {
            return x86::count_avx512(simd, values, range, to, pack);
        }
        if let Some(simd) = pulp::x86::V3::try_new() {
            return x86::count_avx2(simd, values, range, to, pack);
        }
    }
    fused::count_portable(values, range, to, pack)
}

#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
mod x86;

/// Bins of a calibration histogram (TensorRT's EntropyCalibration2 uses 2048).
pub const DEFAULT_BINS: usize = 2048;

/// Values per parallel chunk when one tensor is histogrammed on several threads.
const CHUNK: usize = 1 << 18;

/// A histogram of absolute values over `[0, range)` in equal bins, plus the exact maximum.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    counts: Vec<u64>,
    /// Upper edge of the last bin; a power of two, or 0 while only zeros were seen.
    range: f32,
    /// The largest |x| counted.
    max_abs: f32,
    /// Values counted (non-finite values are skipped and counted apart).
    total: u64,
    /// NaN or infinite values seen (not in `counts`).
    non_finite: u64,
    /// Values exactly zero (counted in bin 0 too).
    zeros: u64,
}

/// The largest power of two a float32 holds, 2^127.
const TOP_POWER_OF_TWO: f32 = 1.701_411_8e38;

/// The smallest power of two that is strictly greater than `x` (for x > 0); for `x` at or
/// above 2^127, where no float32 power of two is greater, 2^127 itself (those values count in
/// the last bin, as values past the range do): doubling a candidate that large would reach
/// infinity, and halving it would never come back.
///
/// Read off the float's bits: a normal `x` lies in `[2^e, 2^(e+1))` for its exponent `e`, a
/// subnormal one is `m * 2^-149` for its mantissa `m`. (`2f32.powi` of the logarithm cannot
/// serve: it underflows to 0 for `x` below 2^-129, and doubling 0 never passes `x`.)
fn pow2_above(x: f32) -> f32 {
    if x >= TOP_POWER_OF_TWO {
        return TOP_POWER_OF_TWO;
    }
    let bits = x.to_bits();
    if x >= f32::MIN_POSITIVE {
        f32::from_bits(((bits >> 23) + 1) << 23)
    } else {
        f32::from_bits(1 << (32 - bits.leading_zeros()))
    }
}

/// What one pass over a block finds beside its bin numbers: the largest finite |x|, the
/// NaNs and infinities, and the zeros.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Scan {
    max_abs: f32,
    non_finite: u64,
    zeros: u64,
}

/// Lanes of the block pass: independent accumulators the compiler keeps in vector registers.
const LANES: usize = 8;

/// Count arrays the counting loop rotates through: consecutive values that fall in one bin (as
/// the zeros after a ReLU do) then update different memory, so the increments don't wait on
/// each other; four arrays of 2048 `u32` still fit in the L1 cache.
const COUNT_LANES: usize = 4;

/// Values whose bin numbers are computed together before they are counted.
const INDEX_BLOCK: usize = 1024;

/// Which code counts. Both give the same histogram, bit for bit; they differ in speed only
/// (`cargo bench --bench histogram` times them side by side).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kernel {
    /// Portable Rust that the compiler vectorises (for SSE2, AVX2 and AVX-512, picked at run
    /// time): a pass for a block's bin numbers and scan, then every value's increment, zeros
    /// included.
    Scalar,
    /// One fused pass in hand-written AVX-512 or AVX2 (safe `std::arch` intrinsics, features
    /// detected at run time): bin numbers a vector at a time, each group's increments straight
    /// after it, the scan kept in vector registers, and bin-0 values left out of the
    /// increments where they are many (a ReLU's zeros). Where the CPU has neither, and for
    /// pieces below `SMALL_PIECE` values until a large one came, it counts as
    /// [`Kernel::Scalar`] does.
    #[default]
    Simd,
}

/// Below this many values a piece is counted straight into its histogram: clearing and
/// flushing the rotating count arrays would cost more than it saves.
const SMALL_PIECE: usize = 4 * INDEX_BLOCK;

/// The bin of `a = |x|` at `scale = bins / range`; NaN and anything past the range land in
/// the last bin (`f < last` is false for NaN).
///
/// The floor is taken without a float-to-integer conversion, which Rust saturates and the
/// compiler then does one lane at a time: adding 2^23 rounds `g` (in `[0, last]`, below 2^16)
/// to the nearest integer and leaves that integer in the low mantissa bits; one is taken off
/// where the rounding went up. Every step is a plain vector operation.
#[inline(always)]
fn bin_of(a: f32, scale: f32, last: f32) -> u32 {
    const ROUNDER: f32 = 8_388_608.0; // 2^23
    let f = a * scale;
    let g = if f < last { f } else { last };
    let t = g + ROUNDER;
    let nearest = t - ROUNDER;
    (t.to_bits() & 0x7F_FFFF) - (nearest > g) as u32
}

/// One read of `block`: its bin numbers at `range` into `index`, and its scan. If the scan's
/// maximum does not fit the range the caller grows the range and bins the block again (rare:
/// the range only doubles, so it settles after the first blocks). Compiled for several
/// instruction sets and picked at run time (AVX2 doubles the lanes of the baseline's SSE2).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512bw+avx2+fma", "x86_64+avx2+fma"))]
fn bin_block(block: &[f32], range: f32, bins: usize, index: &mut [u32]) -> Scan {
    let scale = if range > 0.0 {
        bins as f32 / range
    } else {
        0.0
    };
    let last = (bins - 1) as f32;
    let mut max = [0f32; LANES];
    let mut bad = [0u32; LANES];
    let mut zeros = [0u32; LANES];
    let index = &mut index[..block.len()];
    let mut groups = block.chunks_exact(LANES);
    let mut outs = index.chunks_exact_mut(LANES);
    for (group, out) in (&mut groups).zip(&mut outs) {
        for k in 0..LANES {
            let a = group[k].abs();
            bad[k] += !a.is_finite() as u32;
            zeros[k] += (a == 0.0) as u32;
            // Non-finite values compare false and leave the maximum alone.
            max[k] = if a > max[k] && a < f32::INFINITY {
                a
            } else {
                max[k]
            };
            out[k] = bin_of(a, scale, last);
        }
    }
    let mut scan = Scan {
        max_abs: max.iter().copied().fold(0.0, f32::max),
        non_finite: bad.iter().map(|&n| n as u64).sum(),
        zeros: zeros.iter().map(|&n| n as u64).sum(),
    };
    for (&v, out) in groups.remainder().iter().zip(outs.into_remainder()) {
        let a = v.abs();
        scan.non_finite += !a.is_finite() as u64;
        scan.zeros += (a == 0.0) as u64;
        if a < f32::INFINITY {
            scan.max_abs = scan.max_abs.max(a);
        }
        *out = bin_of(a, scale, last);
    }
    scan
}

/// Counts values into one histogram piece after piece. Between pieces it keeps its rotating
/// count arrays, so a tensor that arrives sample by sample (the calibration run's pieces) costs
/// no allocation, clearing or merge per piece; [`Counter::finish`] moves the counts into the
/// histogram. Every piece is read once: block by block, the block's bin numbers and its scan
/// (maximum, NaNs, infinities, zeros) come from one pass while it sits in the L1 cache, and the
/// range grows (exactly, by doubling) when a block needs it.
#[derive(Debug)]
pub struct Counter {
    hist: Histogram,
    /// What counts.
    kernel: Kernel,
    /// [`COUNT_LANES`] arrays of per-bin counts not yet in `hist`; empty until a piece is large
    /// enough to be worth them, counted straight into `hist` until then.
    lanes: Vec<u32>,
    /// Values counted into `lanes` since they were last moved (kept below `u32::MAX`).
    pending: u64,
    /// NaNs and infinities counted in the last bin of `lanes` since they were last moved.
    misplaced: u64,
    /// Whether the fused pass packs bin-0 values out of its next group (they were many in the
    /// last one).
    pack: bool,
    /// The fused pass's index, made with `lanes`.
    index: Option<Box<fused::Index>>,
}

/// Values per call of the fused pass: its per-lane counters stay far below `u32::MAX`, and
/// its groups start where `add_blocks` would start a block.
const FUSED_RUN: usize = 1 << 24;
const _: () = assert!(FUSED_RUN.is_multiple_of(INDEX_BLOCK));

impl Counter {
    /// An empty counter of `bins` bins (a power of two from 2 to 65536).
    pub fn new(bins: usize) -> Self {
        Counter {
            hist: Histogram::new(bins),
            kernel: Kernel::default(),
            lanes: Vec::new(),
            pending: 0,
            misplaced: 0,
            pack: false,
            index: None,
        }
    }

    /// An empty counter of `bins` bins that counts with `kernel`.
    pub fn with_kernel(bins: usize, kernel: Kernel) -> Self {
        Counter {
            kernel,
            ..Counter::new(bins)
        }
    }

    /// Counts `values` (|x| of each) on the calling thread.
    pub fn add(&mut self, values: &[f32]) {
        let bins = self.hist.counts.len();
        if self.lanes.is_empty() && values.len() >= SMALL_PIECE {
            self.lanes = vec![0u32; COUNT_LANES * bins];
        }
        match (self.kernel, self.lanes.is_empty()) {
            (Kernel::Simd, false) if fused_available() => self.add_fused(values),
            _ => self.add_blocks(values),
        }
    }

    /// [`Kernel::Scalar`]: a block's bin numbers and scan, then its increments.
    fn add_blocks(&mut self, values: &[f32]) {
        let bins = self.hist.counts.len();
        let mut index = [0u32; INDEX_BLOCK];
        for block in values.chunks(INDEX_BLOCK) {
            let mut scan = bin_block(block, self.hist.range, bins, &mut index);
            if scan.max_abs >= self.hist.range && scan.max_abs > 0.0 {
                self.flush();
                self.hist.grow_to(pow2_above(scan.max_abs));
                scan = bin_block(block, self.hist.range, bins, &mut index);
            }
            if self.pending + block.len() as u64 > u64::from(u32::MAX) {
                self.flush();
            }
            self.increment(&index[..block.len()], scan.non_finite);
            self.note(block.len(), scan);
        }
    }

    /// [`Kernel::Simd`]: the fused pass, run after run, the range grown where a pass stops.
    fn add_fused(&mut self, values: &[f32]) {
        let bins = self.hist.counts.len();
        let mut rest = values;
        while !rest.is_empty() {
            let run = &rest[..rest.len().min(FUSED_RUN)];
            if self.pending + run.len() as u64 > u64::from(u32::MAX) {
                self.flush();
            }
            let index = self.index.get_or_insert_with(fused::Index::boxed);
            let to = fused::Target {
                lanes: &mut self.lanes,
                bins,
                index,
            };
            let c = count_fused(run, self.hist.range, to, self.pack);
            self.pack = c.pack;
            self.pending += c.done as u64;
            self.misplaced += c.scan.non_finite;
            // Bin 0 at the current range: the lanes are flushed before the range grows.
            self.hist.counts[0] += c.bin0;
            self.note(c.done, c.scan);
            rest = &rest[c.done..];
            if c.done < run.len() {
                // The block ahead has a finite value at or past the range: grow for the block's
                // maximum, as `add_blocks` does (its bin numbers are thrown away).
                let ahead = &rest[..rest.len().min(INDEX_BLOCK)];
                let index = &mut self.index.as_mut().expect("made for the pass").0;
                let scan = bin_block(ahead, self.hist.range, bins, index);
                self.flush();
                self.hist.grow_to(pow2_above(scan.max_abs));
            }
        }
    }

    /// Adds a counted run's scan to the histogram: its maximum, totals, NaNs and zeros.
    fn note(&mut self, n: usize, scan: Scan) {
        let h = &mut self.hist;
        h.max_abs = h.max_abs.max(scan.max_abs);
        h.total += n as u64 - scan.non_finite;
        h.non_finite += scan.non_finite;
        h.zeros += scan.zeros;
    }

    /// The scalar increments: one per bin number in `index`, of which `non_finite` (NaNs and
    /// infinities, in the last bin) are taken back out.
    fn increment(&mut self, index: &[u32], non_finite: u64) {
        let bins = self.hist.counts.len();
        if self.lanes.is_empty() {
            for &b in index {
                self.hist.counts[b as usize] += 1;
            }
            self.hist.counts[bins - 1] -= non_finite;
            return;
        }
        fused::scatter(index, &mut self.lanes, bins);
        self.pending += index.len() as u64;
        self.misplaced += non_finite;
    }

    /// Adds a histogram counted elsewhere (exactly, as [`Histogram::merge_owned`]).
    pub(crate) fn merge(&mut self, other: Histogram) {
        self.flush();
        self.hist.merge_owned(other);
    }

    /// The histogram of everything counted.
    pub fn finish(mut self) -> Histogram {
        self.flush();
        self.hist
    }

    /// Moves the lane counts into the histogram (at its current range) and takes the misplaced
    /// NaNs and infinities back out of its last bin.
    fn flush(&mut self) {
        if self.pending == 0 {
            return;
        }
        let bins = self.hist.counts.len();
        for lane in self.lanes.chunks_exact_mut(bins) {
            self.hist
                .counts
                .iter_mut()
                .zip(lane.iter_mut())
                .for_each(|(c, n)| {
                    *c += *n as u64;
                    *n = 0;
                });
        }
        self.hist.counts[bins - 1] -= self.misplaced;
        self.misplaced = 0;
        self.pending = 0;
    }
}

/// The histogram of one piece of a tensor (at most [`CHUNK`] values).
fn count_chunk(values: &[f32], bins: usize, kernel: Kernel) -> Histogram {
    debug_assert!(values.len() <= CHUNK && bins <= 1 << 16);
    let mut counter = Counter::with_kernel(bins, kernel);
    counter.add(values);
    counter.finish()
}

impl Histogram {
    /// An empty histogram with `bins` bins (a power of two from 2 to 65536).
    pub fn new(bins: usize) -> Self {
        assert!(
            bins >= 2 && bins.is_power_of_two() && bins <= 1 << 16,
            "bins must be a power of two in [2, 65536]"
        );
        Histogram {
            counts: vec![0; bins],
            range: 0.0,
            max_abs: 0.0,
            total: 0,
            non_finite: 0,
            zeros: 0,
        }
    }

    /// Counts of each bin, from 0 upward.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Upper edge of the last bin.
    pub fn range(&self) -> f32 {
        self.range
    }

    /// Width of one bin (0 while the range is 0).
    pub(crate) fn bin_width(&self) -> f32 {
        self.range / self.counts.len() as f32
    }

    /// The largest |x| counted.
    pub fn max_abs(&self) -> f32 {
        self.max_abs
    }

    /// Number of finite values counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Number of values exactly zero (they are also in bin 0). After a ReLU they are about
    /// half of all values: one spike that every threshold quantizes exactly.
    pub fn zeros(&self) -> u64 {
        self.zeros
    }

    /// Number of NaN or infinite values seen and left out.
    pub fn non_finite(&self) -> u64 {
        self.non_finite
    }

    /// Widens the range to `new_range` (a power of two ≥ the current one) by folding bins.
    fn grow_to(&mut self, new_range: f32) {
        if new_range <= self.range {
            return;
        }
        if self.range == 0.0 {
            // Only zeros so far: they all stay in bin 0.
            self.range = new_range;
            return;
        }
        let bins = self.counts.len();
        while self.range < new_range {
            for i in 0..bins / 2 {
                self.counts[i] = self.counts[2 * i] + self.counts[2 * i + 1];
            }
            self.counts[bins / 2..].iter_mut().for_each(|c| *c = 0);
            self.range *= 2.0;
        }
    }

    /// Counts `values` (|x| of each) into this histogram, growing the range when needed.
    /// Large slices are split across rayon's threads; each piece is read from memory once.
    pub fn add(&mut self, values: &[f32]) {
        self.add_with(values, Kernel::default());
    }

    /// [`Histogram::add`] with the bin numbers computed by `kernel` (the same result).
    pub(crate) fn add_with(&mut self, values: &[f32], kernel: Kernel) {
        let bins = self.counts.len();
        if values.len() <= CHUNK {
            let part = count_chunk(values, bins, kernel);
            self.merge_owned(part);
            return;
        }
        let part = values
            .par_chunks(CHUNK)
            .map(|c| count_chunk(c, bins, kernel))
            .reduce(
                || Histogram::new(bins),
                |mut a, b| {
                    a.merge_owned(b);
                    a
                },
            );
        self.merge_owned(part);
    }

    /// A histogram of `values` alone.
    pub(crate) fn from_values(bins: usize, values: &[f32]) -> Self {
        let mut h = Histogram::new(bins);
        h.add(values);
        h
    }

    /// [`Histogram::from_values`] with the bin numbers computed by `kernel` (the same result).
    pub fn from_values_with(bins: usize, values: &[f32], kernel: Kernel) -> Self {
        let mut h = Histogram::new(bins);
        h.add_with(values, kernel);
        h
    }

    #[cfg(test)]
    /// Adds `other` into `self` exactly (both are brought to the larger range first).
    pub(crate) fn merge(&mut self, other: &Histogram) {
        self.merge_owned(other.clone());
    }

    /// [`Histogram::merge`] of a histogram that is not needed afterwards (no copy of it).
    pub(crate) fn merge_owned(&mut self, mut other: Histogram) {
        assert_eq!(self.counts.len(), other.counts.len(), "bin counts differ");
        let range = self.range.max(other.range);
        self.grow_to(range);
        other.grow_to(range);
        self.counts
            .iter_mut()
            .zip(&other.counts)
            .for_each(|(x, y)| *x += y);
        self.max_abs = self.max_abs.max(other.max_abs);
        self.total += other.total;
        self.non_finite += other.non_finite;
        self.zeros += other.zeros;
    }
}
