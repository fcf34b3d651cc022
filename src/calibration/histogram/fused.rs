//! The fused counting pass of [`super::Kernel::Simd`]: bin numbers computed a group of values at
//! a time, straight into the counter's rotating count arrays, with no pass of its own for the
//! scan (maximum, zeros, NaNs and infinities).
//!
//! A pass counts at the range it is given, a group of [`GROUP`] values at a time (the scalar
//! kernel's blocks), and stops before a group with a finite value the range must grow for; the
//! caller flushes, grows the range (exactly, by doubling) for that group as the scalar kernel
//! does for its block, and starts the pass again there. So every value is counted at the
//! range the scalar kernel counts it at, and the counts are the same, bit for bit.
//!
//! Groups with many values in bin 0 (a ReLU's zeros) are packed: their bin-0 values are left
//! out of the increments (where each would wait on the one before, as all land on one counter)
//! and added to bin 0 at once. Whether the next group is packed follows from the group before,
//! as packing costs more than it saves where bin 0 is rare.
//!
//! `count_fused` (in the parent module) picks the widest pass the CPU has: AVX-512 or AVX2 (in `x86`, safe intrinsics),
//! else [`count_portable`], which all of them must equal.

use super::{bin_block, Scan, COUNT_LANES, INDEX_BLOCK, TOP_POWER_OF_TWO};

/// Values binned together before their increments: the scalar kernel's block, so that the
/// range grows at the same points. Their bin numbers (4 KB) stay in the L1 cache, and the loop
/// over them is long enough that its one mispredicted exit costs little.
pub(super) const GROUP: usize = INDEX_BLOCK;

/// The bin numbers of one group, between its pass and its increments: kept by the counter
/// (clearing 4 KB per run would cost as much as counting a few hundred values), and aligned so
/// that a whole vector of bin numbers is stored in one cache line.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Index(pub [u32; GROUP]);

impl Index {
    /// A zeroed index, on the heap.
    pub(crate) fn boxed() -> Box<Index> {
        Box::new(Index([0; GROUP]))
    }
}

/// What a pass over `values` did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Counted {
    /// Values counted: all, or those before the first group (of [`GROUP`], from the first
    /// value on) with a finite value at or past the range; nothing from that group on is in
    /// the counts or the scan.
    pub done: usize,
    /// The scan of the values counted.
    pub scan: Scan,
    /// Values of bin 0 left out of the count arrays: the caller adds them to bin 0.
    pub(crate) bin0: u64,
    /// Whether the last group had enough bin-0 values to pack the next one.
    pub(crate) pack: bool,
}

/// The |x| from which the range must grow: the range itself; the smallest positive float while
/// the range is 0 (only zeros so far); never (infinity) once the range is 2^127, where larger
/// finite values count in the last bin.
pub(super) fn grow_threshold(range: f32) -> f32 {
    if range >= TOP_POWER_OF_TWO {
        f32::INFINITY
    } else if range > 0.0 {
        range
    } else {
        f32::from_bits(1)
    }
}

/// One increment per bin number in `index`, rotating over the [`COUNT_LANES`] count arrays in
/// `lanes` (each `bins` long): consecutive values in one bin then update different memory.
#[inline(always)]
pub(super) fn scatter(index: &[u32], lanes: &mut [u32], bins: usize) {
    let (l0, rest) = lanes.split_at_mut(bins);
    let (l1, rest) = rest.split_at_mut(bins);
    let (l2, l3) = rest.split_at_mut(bins);
    let mut quads = index.chunks_exact(COUNT_LANES);
    for q in &mut quads {
        l0[q[0] as usize] += 1;
        l1[q[1] as usize] += 1;
        l2[q[2] as usize] += 1;
        l3[q[3] as usize] += 1;
    }
    for &b in quads.remainder() {
        l0[b as usize] += 1;
    }
}

/// The two scans of consecutive runs of values as one.
pub(super) fn join(a: Scan, b: Scan) -> Scan {
    Scan {
        max_abs: a.max_abs.max(b.max_abs),
        non_finite: a.non_finite + b.non_finite,
        zeros: a.zeros + b.zeros,
    }
}

/// Where a fused pass counts: [`COUNT_LANES`] arrays of `bins` counts, and the index it
/// passes a group's bin numbers through.
pub(super) struct Target<'a> {
    pub(crate) lanes: &'a mut [u32],
    pub bins: usize,
    pub index: &'a mut Index,
}

/// [`super::count_fused`] in portable Rust: [`bin_block`] (vectorised by the compiler) a group at a time,
/// then the group's increments; no packing (a scalar packing loop costs more than the
/// increments it saves). The twin the SIMD passes are tested against, and what they fall back
/// to for ranges so small that `bins / range` overflows. [`super::Counter`] does not run it:
/// where the CPU has neither SIMD pass, [`super::Kernel::Simd`] counts as
/// [`super::Kernel::Scalar`] does.
pub(super) fn count_portable(values: &[f32], range: f32, to: Target, pack: bool) -> Counted {
    let Target { lanes, bins, index } = to;
    let index = &mut index.0;
    let grow = grow_threshold(range);
    let mut out = Counted {
        done: 0,
        scan: Scan::default(),
        bin0: 0,
        pack,
    };
    for group in values.chunks(GROUP) {
        let scan = bin_block(group, range, bins, index);
        // The scan's maximum is finite: the range must grow for it.
        if scan.max_abs >= grow {
            break;
        }
        scatter(&index[..group.len()], lanes, bins);
        out.scan = join(out.scan, scan);
        out.done += group.len();
    }
    out
}
