//! Tests of the histogram, the counter and every counting pass against its scalar twin.

use super::*;
use proptest::prelude::*;

#[test]
fn values_beyond_two_to_the_127_end_in_the_last_bin_instead_of_hanging() {
    assert_eq!(TOP_POWER_OF_TWO, 2f32.powi(127));
    assert_eq!(pow2_above(f32::MAX), TOP_POWER_OF_TWO);
    assert_eq!(pow2_above(TOP_POWER_OF_TWO / 2.0), TOP_POWER_OF_TWO);
    let mut values = vec![1.0f32; 5000];
    values[7] = f32::MAX;
    values[4999] = -3e38;
    for h in [
        Histogram::from_values(64, &values[..10]),
        Histogram::from_values(64, &values),
    ] {
        assert_eq!(h.range(), TOP_POWER_OF_TWO);
        assert_eq!(h.max_abs(), f32::MAX);
        assert_eq!(h.counts()[63], if h.total() > 10 { 2 } else { 1 });
        assert_eq!(h.non_finite(), 0);
    }
}

#[test]
fn subnormal_maxima_get_the_power_of_two_above_them_instead_of_hanging() {
    // 2^-149 (the smallest float) to 2^-126 (the smallest normal one) and a few normal values,
    // against doubling from the smallest float.
    let mut p = f32::from_bits(1);
    for x in [
        1e-45,
        3e-45,
        1e-40,
        1.5e-39,
        5e-39,
        1.1e-38,
        f32::MIN_POSITIVE,
        1e-30,
        0.75,
        3.0,
    ] {
        while p <= x {
            p *= 2.0;
        }
        assert_eq!(pow2_above(x), p, "{x:e}");
    }
    let h = Histogram::from_values(8, &[1e-40, -3e-41, 0.0]);
    assert_eq!(h.range(), pow2_above(1e-40));
    assert_eq!(h.max_abs(), 1e-40);
}

#[test]
fn counts_and_range() {
    let h = Histogram::from_values(8, &[0.1, -0.2, 0.9, 3.0, f32::NAN]);
    assert_eq!(h.range(), 4.0);
    assert_eq!(h.max_abs(), 3.0);
    assert_eq!(h.total(), 4);
    assert_eq!(h.non_finite(), 1);
    // bin width 0.5: 0.1, 0.2 → bin 0; 0.9 → bin 1; 3.0 → bin 6
    assert_eq!(h.counts(), &[2, 1, 0, 0, 0, 0, 1, 0]);
}

#[test]
fn exact_power_of_two_goes_to_the_next_range() {
    let h = Histogram::from_values(4, &[2.0]);
    assert_eq!(h.range(), 4.0);
    assert_eq!(h.counts(), &[0, 0, 1, 0]);
}

#[test]
fn zeros_then_values() {
    let mut h = Histogram::from_values(4, &[0.0, 0.0]);
    assert_eq!(h.range(), 0.0);
    h.add(&[1.5]);
    assert_eq!(h.range(), 2.0);
    assert_eq!(h.counts(), &[2, 0, 0, 1]);
}

/// The histogram counted one value at a time, the obvious way.
fn naive(bins: usize, values: &[f32]) -> (Vec<u64>, f32, u64, u64) {
    let finite: Vec<f32> = values
        .iter()
        .filter(|v| v.is_finite())
        .map(|v| v.abs())
        .collect();
    let max = finite.iter().copied().fold(0f32, f32::max);
    let range = if max > 0.0 { pow2_above(max) } else { 0.0 };
    let mut counts = vec![0u64; bins];
    for v in &finite {
        let b = if range > 0.0 {
            (v / range * bins as f32) as usize
        } else {
            0
        };
        counts[b.min(bins - 1)] += 1;
    }
    (
        counts,
        range,
        finite.len() as u64,
        (values.len() - finite.len()) as u64,
    )
}

#[test]
fn simd_paths_present() {
    // Says which passes the proptests below really exercised on this CPU.
    #[cfg(target_arch = "x86_64")]
    eprintln!(
        "AVX2 (x86-64-v3): {}, AVX-512 (x86-64-v4): {}",
        pulp::x86::V3::is_available(),
        pulp::x86::V4::is_available()
    );
}

/// A fused pass: values, range, where it counts, whether its first group is packed.
type Pass = fn(&[f32], f32, fused::Target, bool) -> fused::Counted;

/// Every fused pass this CPU can run, by name: the run-time pick, the portable twin, and the
/// SIMD passes of [`simd_passes`].
fn passes() -> Vec<(&'static str, Pass)> {
    let mut passes: Vec<(&'static str, Pass)> = vec![
        ("dispatch", count_fused),
        ("portable", fused::count_portable),
    ];
    passes.extend(simd_passes());
    passes
}

/// The AVX-512 and AVX2 passes where the CPU has them (AVX2 alone even on an AVX-512 CPU).
#[cfg(target_arch = "x86_64")]
fn simd_passes() -> Vec<(&'static str, Pass)> {
    let mut passes: Vec<(&'static str, Pass)> = Vec::new();
    if pulp::x86::V4::is_available() {
        passes.push(("avx512", |v, r, to, p| {
            let simd = pulp::x86::V4::try_new().expect("AVX-512");
            x86::count_avx512(simd, v, r, to, p)
        }));
    }
    if pulp::x86::V3::is_available() {
        passes.push(("avx2", |v, r, to, p| {
            let simd = pulp::x86::V3::try_new().expect("AVX2");
            x86::count_avx2(simd, v, r, to, p)
        }));
    }
    passes
}

/// No SIMD passes off x86-64.
#[cfg(not(target_arch = "x86_64"))]
fn simd_passes() -> Vec<(&'static str, Pass)> {
    Vec::new()
}

/// What a fused pass did, comparable across passes: values counted, the scan (maximum as
/// bits), and the counts per bin (count arrays summed, bin-0 values left out added back).
type Outcome = (usize, (u32, u64, u64), Vec<u64>);

/// Runs `pass` on fresh count arrays.
fn outcome(pass: Pass, values: &[f32], range: f32, bins: usize, pack: bool) -> Outcome {
    let mut lanes = vec![0u32; COUNT_LANES * bins];
    let index = &mut fused::Index::boxed();
    let to = fused::Target {
        lanes: &mut lanes,
        bins,
        index,
    };
    let c = pass(values, range, to, pack);
    let mut counts = vec![0u64; bins];
    for lane in lanes.chunks_exact(bins) {
        counts
            .iter_mut()
            .zip(lane)
            .for_each(|(n, &l)| *n += u64::from(l));
    }
    counts[0] += c.bin0;
    let s = c.scan;
    (c.done, (s.max_abs.to_bits(), s.non_finite, s.zeros), counts)
}

/// What every fused pass must do, value by value with the scalar kernel's [`bin_of`]: stop
/// before the first group of [`fused::GROUP`] values with a finite one at or past the range
/// (any at all while the range is 0, none once it is 2^127), and count the values before it,
/// NaNs and infinities in the last bin.
fn fused_reference(values: &[f32], range: f32, bins: usize) -> Outcome {
    let past = values.iter().position(|v| {
        let a = v.abs();
        let past = if range >= TOP_POWER_OF_TWO {
            false
        } else {
            a >= range && a > 0.0
        };
        past && a.is_finite()
    });
    let done = past.map_or(values.len(), |at| at / fused::GROUP * fused::GROUP);
    let scale = if range > 0.0 {
        bins as f32 / range
    } else {
        0.0
    };
    let mut counts = vec![0u64; bins];
    let (mut max, mut non_finite, mut zeros) = (0f32, 0, 0);
    for v in &values[..done] {
        let a = v.abs();
        counts[bin_of(a, scale, (bins - 1) as f32) as usize] += 1;
        if a.is_finite() {
            max = max.max(a);
        } else {
            non_finite += 1;
        }
        zeros += (a == 0.0) as u64;
    }
    (done, (max.to_bits(), non_finite, zeros), counts)
}

/// A value for the SIMD tests: any bit pattern, a special one, or one near a range.
fn any_value() -> impl Strategy<Value = f32> {
    prop_oneof![
        any::<u32>().prop_map(f32::from_bits),
        prop::sample::select(vec![
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MAX,
            -f32::MAX,
            TOP_POWER_OF_TWO,
            f32::MIN_POSITIVE,
            1e-45,
            -1e-45,
            1e-40,
            1e30,
            0.5,
            1.0,
            2.0,
            -4.0,
        ]),
        -8f32..8.0,
        (0u32..4096).prop_map(|i| i as f32 / 512.0),
    ]
}

/// 2^e, for e from -149 (`powi` gives 0 below -129).
fn pow2(e: i32) -> f32 {
    if e >= -126 {
        f32::from_bits(((e + 127) as u32) << 23)
    } else {
        f32::from_bits(1 << (e + 149))
    }
}

/// A range as the counter has them: 0, 2^127, or a power of two, often a common one.
fn any_range() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(0.0),
        Just(TOP_POWER_OF_TWO),
        (-148i32..=127).prop_map(pow2),
        (-3i32..6).prop_map(pow2),
    ]
}

/// Values for a pass at `range`: most inside it (so that long runs take the lean steps), zeros
/// (long runs of them make the pass pack), NaNs, infinities and subnormals, and where `wild`,
/// anything from [`any_value`] now and then; one value, somewhere, past the range.
fn values_for(range: f32, len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<f32>> {
    let inside = (-1f32..1.0).prop_map(move |u| if range > 0.0 { u * range } else { 0.0 });
    let special = prop::sample::select(vec![f32::NAN, f32::NEG_INFINITY, f32::INFINITY, 1e-45]);
    let tame = prop_oneof![12 => inside.clone(), 3 => Just(0.0f32), 1 => special];
    let wild = prop_oneof![12 => inside, 3 => Just(0.0f32), 1 => any_value()];
    let past = if range > 0.0 { range * 1.5 } else { 1.0 };
    (
        prop_oneof![
            proptest::collection::vec(tame, len.clone()),
            proptest::collection::vec(wild, len),
        ],
        proptest::collection::vec((0usize..3000, 0usize..1500), 0..3),
        proptest::option::of(any::<prop::sample::Index>()),
    )
        .prop_map(move |(mut values, zero_runs, past_at)| {
            for (start, n) in zero_runs {
                let end = (start + n).min(values.len());
                values[start.min(end)..end].fill(0.0);
            }
            if let (Some(at), false) = (past_at, values.is_empty()) {
                let at = at.index(values.len());
                values[at] = past;
            }
            values
        })
}

proptest! {
    /// Every fused pass (AVX-512, AVX2, the run-time pick, the portable twin) counts as the
    /// scalar kernel does, value by value: over lengths from 0 across the vector widths and
    /// the group size, start offsets 0 to 15 (alignments), ranges from 0 through tiny and huge
    /// powers of two to 2^127, bin counts from 2 to 65536, values with NaN, ±Inf, ±0,
    /// subnormals, values past the range (where the pass must stop) and at or above 2^127,
    /// runs of zeros, and either packing state to start with.
    #[test]
    fn fused_passes_equal_scalar(
        (range, values) in any_range().prop_flat_map(|r| (Just(r), values_for(r, 0..2600))),
        offset in 0usize..16,
        bins_log2 in 1u32..17,
        pack in any::<bool>(),
    ) {
        let values = &values[offset.min(values.len())..];
        let bins = 1usize << bins_log2;
        let want = fused_reference(values, range, bins);
        for (name, pass) in passes() {
            let got = outcome(pass, values, range, bins, pack);
            prop_assert_eq!(&got, &want, "{} pass", name);
        }
    }

    /// The SIMD kernel's counter, fed piece by piece (pieces below and above the size that
    /// takes the count arrays, at any start offset), gives the scalar kernel's histogram: the
    /// range growing between pieces and within one, from 0 up to 2^127, NaNs, infinities,
    /// subnormals and runs of zeros included.
    #[test]
    fn simd_counter_equals_scalar_counter(
        pieces in proptest::collection::vec(
            (any_range().prop_flat_map(|r| values_for(r, 0..6000)), 0usize..16),
            0..6,
        ),
        bins_log2 in 1u32..13,
    ) {
        let bins = 1usize << bins_log2;
        let mut scalar = Counter::with_kernel(bins, Kernel::Scalar);
        let mut simd = Counter::with_kernel(bins, Kernel::Simd);
        for (values, offset) in &pieces {
            let piece = &values[(*offset).min(values.len())..];
            scalar.add(piece);
            simd.add(piece);
        }
        prop_assert_eq!(simd.finish(), scalar.finish());
    }

    /// Whole histograms: the SIMD kernel equals the scalar one (and so today's counting),
    /// small pieces and lane-split ones, NaN/Inf/zeros/huge values (up to f32::MAX, the range
    /// then 2^127) included.
    #[test]
    fn simd_kernel_equals_scalar_kernel(
        values in proptest::collection::vec(any_value(), 0..9_000),
        bins_log2 in 1u32..13,
    ) {
        let bins = 1usize << bins_log2;
        let scalar = Histogram::from_values_with(bins, &values, Kernel::Scalar);
        let simd = Histogram::from_values_with(bins, &values, Kernel::Simd);
        prop_assert_eq!(simd, scalar);
    }

    /// The lane-split counting (pieces from 4096 values) and the direct counting of small
    /// pieces both equal counting one value at a time, NaNs and infinities included,
    /// across block and lane boundaries.
    #[test]
    fn fast_counting_equals_naive(
        mut values in proptest::collection::vec(-100f32..100.0, 0..10_000),
        specials in proptest::collection::vec((0usize..10_000, 0u8..4), 0..20),
    ) {
        for (at, kind) in specials {
            if let Some(v) = values.get_mut(at) {
                *v = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0][kind as usize];
            }
        }
        let h = Histogram::from_values(64, &values);
        let (counts, range, total, non_finite) = naive(64, &values);
        prop_assert_eq!(h.counts(), counts.as_slice());
        prop_assert_eq!(h.range(), range);
        prop_assert_eq!(h.total(), total);
        prop_assert_eq!(h.non_finite(), non_finite);
        prop_assert_eq!(h.zeros(), values.iter().filter(|v| **v == 0.0).count() as u64);
    }

    /// A counter fed piece by piece (pieces below and above the size that takes the
    /// rotating arrays, NaNs among them, the range growing between pieces and within one)
    /// gives the histogram of all the values at once.
    #[test]
    fn counter_over_pieces_equals_one_pass(
        pieces in proptest::collection::vec(
            (proptest::collection::vec(-1f32..1.0, 0..6_000), -3i32..4, any::<bool>()),
            0..6,
        ),
    ) {
        let pieces: Vec<Vec<f32>> = pieces
            .into_iter()
            .map(|(v, exp, nan)| {
                let mut v: Vec<f32> = v.iter().map(|x| x * 10f32.powi(exp)).collect();
                if nan && !v.is_empty() {
                    v[0] = f32::NAN;
                }
                v
            })
            .collect();
        let all: Vec<f32> = pieces.concat();
        let mut counter = Counter::new(64);
        for p in &pieces {
            counter.add(p);
        }
        prop_assert_eq!(counter.finish(), Histogram::from_values(64, &all));
        let (counts, range, total, non_finite) = naive(64, &all);
        let h = Histogram::from_values(64, &all);
        prop_assert_eq!(h.counts(), counts.as_slice());
        prop_assert_eq!((h.range(), h.total(), h.non_finite()), (range, total, non_finite));
    }

    /// Growing and merging in any split gives the histogram of all values at once.
    #[test]
    fn merge_equals_one_pass(
        a in proptest::collection::vec(-1000f32..1000.0, 0..200),
        b in proptest::collection::vec(-0.01f32..0.01, 0..200),
        c in proptest::collection::vec(-50f32..50.0, 0..200),
    ) {
        let all: Vec<f32> = a.iter().chain(&b).chain(&c).copied().collect();
        let whole = Histogram::from_values(64, &all);
        let mut seq = Histogram::from_values(64, &b);
        seq.add(&c);
        seq.add(&a);
        let mut merged = Histogram::from_values(64, &c);
        merged.merge(&Histogram::from_values(64, &a));
        merged.merge(&Histogram::from_values(64, &b));
        prop_assert_eq!(&seq, &whole);
        prop_assert_eq!(&merged, &whole);
    }
}
