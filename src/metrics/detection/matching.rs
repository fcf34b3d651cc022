//! Agreement between the detections of the model under test (A) and reference detections
//! (B), image by image: how many reference boxes A finds, which boxes only one side has,
//! how scores moved, and COCO-style mAP of A taking B's boxes as ground truth.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use anyhow::{bail, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::boxes::{by_score_desc, iou64, Detection};
use super::coco::{self, GroundTruth};

/// How many boxes of one class only one side has, at IoU 0.5.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClassMismatch {
    /// Class index.
    pub class: usize,
    /// Boxes of A with no matching reference box.
    pub only_a: usize,
    /// Reference boxes that no box of A matches.
    pub only_b: usize,
}

/// How far detections under test (A) agree with reference detections (B).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetectionAgreement {
    /// Images compared.
    pub images: usize,
    /// Boxes of A, all images together.
    pub boxes_a: usize,
    /// Boxes of B, all images together.
    pub boxes_b: usize,
    /// Reference boxes with a same-class box of A at IoU >= 0.5, % of B's boxes (None when B has none).
    pub matched_50_pct: Option<f64>,
    /// Reference boxes with a same-class box of A at IoU >= 0.75, % of B's boxes (None when
    /// B has none).
    pub matched_75_pct: Option<f64>,
    /// At IoU 0.5: A's boxes with no match.
    pub only_a: usize,
    /// At IoU 0.5: B's boxes with no match.
    pub only_b: usize,
    /// Score shift of boxes matched at IoU 0.5: mean of (score_a - score_b) (None when
    /// nothing matched).
    pub score_shift_mean: Option<f64>,
    /// Mean of |score_a - score_b| over boxes matched at IoU 0.5.
    pub(crate) score_shift_mean_abs: Option<f64>,
    /// Largest |score_a - score_b| over boxes matched at IoU 0.5.
    pub(crate) score_shift_max_abs: Option<f64>,
    /// Mean IoU of the boxes matched at 0.5.
    pub matched_iou_mean: Option<f64>,
    /// COCO-style mAP at IoU 0.5 of A's boxes taking B's as ground truth (every box of A, not
    /// COCO's first 100 per image and class, so identical runs score exactly 1; None when B has
    /// no boxes).
    pub map50: Option<f64>,
    /// The same averaged over IoU 0.50:0.95.
    pub map50_95: Option<f64>,
    /// Classes with the most unmatched boxes (either side) at IoU 0.5, worst first, at most 5: (class, only_a, only_b).
    pub(crate) worst_classes: Vec<ClassMismatch>,
}

/// Matches the boxes of A to those of B in one image at an IoU threshold.
///
/// A's boxes, best score first, each take the not yet taken B box of the same class with
/// the highest IoU (the first on ties), if that IoU is at least `threshold`. Returns, for
/// each of A's boxes in A's order, the index of its B box.
pub(crate) fn match_image(a: &[Detection], b: &[Detection], threshold: f64) -> Vec<Option<usize>> {
    let mut b_by_class: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (j, d) in b.iter().enumerate() {
        b_by_class.entry(d.class).or_default().push(j);
    }
    let mut order: Vec<usize> = (0..a.len()).collect();
    order.sort_by(|&i, &j| by_score_desc(&a[i], &a[j]));
    let mut taken = vec![false; b.len()];
    let mut out = vec![None; a.len()];
    for i in order {
        let Some(candidates) = b_by_class.get(&a[i].class) else {
            continue;
        };
        let mut best: Option<(usize, f64)> = None;
        for &j in candidates {
            if taken[j] {
                continue;
            }
            let iou = iou64(&a[i].bbox, &b[j].bbox);
            if iou >= threshold && best.is_none_or(|(_, best_iou)| iou > best_iou) {
                best = Some((j, iou));
            }
        }
        if let Some((j, _)) = best {
            taken[j] = true;
            out[i] = Some(j);
        }
    }
    out
}

/// Compares detections under test (A) with reference detections (B), image by image.
pub fn agreement(a: &[Vec<Detection>], b: &[Vec<Detection>]) -> Result<DetectionAgreement> {
    agreement_above(a, b, f32::NEG_INFINITY)
}

/// [`agreement`] of the boxes scoring at least `conf`, where both sides hold candidates below
/// it too (decoded down to `conf` minus a tolerance): every count is of boxes at `conf` or
/// above, but a box pairs with the other side's candidate wherever that scores. So a box whose
/// score only crossed `conf` (0.2502 on one side, 0.2498 on the other) is a matched box with a
/// score shift, not a box one side lost; the agreement mAP takes B's boxes at `conf` as ground
/// truth and every candidate of A as a detection.
pub(crate) fn agreement_above(
    a: &[Vec<Detection>],
    b: &[Vec<Detection>],
    conf: f32,
) -> Result<DetectionAgreement> {
    if a.len() != b.len() {
        bail!(
            "the detections under test cover {} images but the reference covers {}",
            a.len(),
            b.len()
        );
    }
    check_scores(a, "under test")?;
    check_scores(b, "of the reference")?;
    // Images are tallied in parallel but summed in order, so the result is reproducible.
    let tallies: Vec<Tally> = a
        .par_iter()
        .zip(b.par_iter())
        .map(|(a, b)| tally_image(a, b, conf))
        .collect();
    let tally = tallies.into_iter().fold(Tally::default(), Tally::merge);
    let gts: Vec<Vec<GroundTruth>> = b
        .iter()
        .map(|image| {
            image
                .iter()
                .filter(|d| d.score >= conf)
                .map(|d| GroundTruth {
                    bbox: d.bbox,
                    class: d.class,
                    crowd: false,
                })
                .collect()
        })
        .collect();
    // Every box of A counts: COCO's 100 per image and class would cut the recall of a class
    // crowded past it, so identical runs would not score 1.
    let map = coco::evaluate(&gts, a, usize::MAX)?;
    let has_map = map.classes > 0;
    let pct = |n: usize| (tally.boxes_b > 0).then(|| 100.0 * n as f64 / tally.boxes_b as f64);
    let per_match = |sum: f64| (tally.matched50 > 0).then(|| sum / tally.matched50 as f64);
    let mut worst: Vec<ClassMismatch> = tally
        .per_class
        .iter()
        .filter(|(_, &(only_a, only_b))| only_a + only_b > 0)
        .map(|(&class, &(only_a, only_b))| ClassMismatch {
            class,
            only_a,
            only_b,
        })
        .collect();
    worst.sort_by_key(|c| (Reverse(c.only_a + c.only_b), c.class));
    worst.truncate(5);
    Ok(DetectionAgreement {
        images: a.len(),
        boxes_a: tally.boxes_a,
        boxes_b: tally.boxes_b,
        matched_50_pct: pct(tally.matched50),
        matched_75_pct: pct(tally.matched75),
        only_a: tally.only_a,
        only_b: tally.only_b,
        score_shift_mean: per_match(tally.shift_sum),
        score_shift_mean_abs: per_match(tally.shift_abs_sum),
        score_shift_max_abs: (tally.matched50 > 0).then_some(tally.shift_abs_max),
        matched_iou_mean: per_match(tally.iou_sum),
        map50: has_map.then_some(map.map50),
        map50_95: has_map.then_some(map.map50_95),
        worst_classes: worst,
    })
}

/// Fails on the first score that is not finite.
fn check_scores(images: &[Vec<Detection>], side: &str) -> Result<()> {
    for (i, image) in images.iter().enumerate() {
        if let Some((j, d)) = image.iter().enumerate().find(|(_, d)| !d.score.is_finite()) {
            bail!(
                "image {i}, detection {j} {side}: score {} is not finite",
                d.score
            );
        }
    }
    Ok(())
}

/// Counts gathered over images.
#[derive(Default)]
struct Tally {
    boxes_a: usize,
    boxes_b: usize,
    matched50: usize,
    matched75: usize,
    only_a: usize,
    only_b: usize,
    shift_sum: f64,
    shift_abs_sum: f64,
    shift_abs_max: f64,
    iou_sum: f64,
    /// Per class: (only in A, only in B).
    per_class: BTreeMap<usize, (usize, usize)>,
}

impl Tally {
    /// Adds the counts of another set of images.
    fn merge(mut self, other: Tally) -> Tally {
        self.boxes_a += other.boxes_a;
        self.boxes_b += other.boxes_b;
        self.matched50 += other.matched50;
        self.matched75 += other.matched75;
        self.only_a += other.only_a;
        self.only_b += other.only_b;
        self.shift_sum += other.shift_sum;
        self.shift_abs_sum += other.shift_abs_sum;
        self.shift_abs_max = self.shift_abs_max.max(other.shift_abs_max);
        self.iou_sum += other.iou_sum;
        for (class, (only_a, only_b)) in other.per_class {
            let entry = self.per_class.entry(class).or_default();
            entry.0 += only_a;
            entry.1 += only_b;
        }
        self
    }
}

/// Counts of one image: boxes at `conf` or above, paired with candidates of any score.
fn tally_image(a: &[Detection], b: &[Detection], conf: f32) -> Tally {
    let counted = |d: &Detection| d.score >= conf;
    let mut t = Tally {
        boxes_a: a.iter().filter(|d| counted(d)).count(),
        boxes_b: b.iter().filter(|d| counted(d)).count(),
        ..Tally::default()
    };
    t.matched75 = match_image(a, b, 0.75)
        .iter()
        .flatten()
        .filter(|&&j| counted(&b[j]))
        .count();
    let mut b_matched = vec![false; b.len()];
    for (da, m) in a.iter().zip(match_image(a, b, 0.5)) {
        let Some(j) = m else {
            if counted(da) {
                t.only_a += 1;
                t.per_class.entry(da.class).or_default().0 += 1;
            }
            continue;
        };
        b_matched[j] = true;
        if !counted(&b[j]) {
            continue;
        }
        t.matched50 += 1;
        let shift = f64::from(da.score) - f64::from(b[j].score);
        t.shift_sum += shift;
        t.shift_abs_sum += shift.abs();
        t.shift_abs_max = t.shift_abs_max.max(shift.abs());
        t.iou_sum += iou64(&da.bbox, &b[j].bbox);
    }
    for (db, _) in b.iter().zip(&b_matched).filter(|(d, &m)| !m && counted(d)) {
        t.only_b += 1;
        t.per_class.entry(db.class).or_default().1 += 1;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::super::decode::{decode_head, DecodeOptions, HeadLayout};
    use super::*;
    use std::time::Instant;

    fn det(bbox: [f32; 4], score: f32, class: usize) -> Detection {
        Detection { bbox, score, class }
    }

    fn close(a: Option<f64>, b: f64, tol: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() <= tol)
    }

    /// Two images with overlapping boxes of one class and boxes of several classes.
    fn images() -> Vec<Vec<Detection>> {
        vec![
            vec![
                det([0.0, 0.0, 10.0, 10.0], 0.9, 0),
                det([20.0, 0.0, 30.0, 10.0], 0.8, 0),
                det([0.0, 20.0, 10.0, 30.0], 0.7, 1),
                det([4.0, 0.0, 14.0, 10.0], 0.4, 0),
            ],
            vec![det([0.0, 0.0, 10.0, 10.0], 0.6, 2)],
            vec![],
        ]
    }

    #[test]
    fn identical_detections_agree_fully() {
        let a = images();
        let r = agreement(&a, &a).unwrap();
        assert_eq!((r.images, r.boxes_a, r.boxes_b), (3, 5, 5));
        assert_eq!(r.matched_50_pct, Some(100.0));
        assert_eq!(r.matched_75_pct, Some(100.0));
        assert_eq!((r.only_a, r.only_b), (0, 0));
        assert_eq!(r.score_shift_mean, Some(0.0));
        assert_eq!(r.score_shift_max_abs, Some(0.0));
        assert_eq!(r.matched_iou_mean, Some(1.0));
        assert_eq!(r.map50, Some(1.0));
        assert_eq!(r.map50_95, Some(1.0));
        assert!(r.worst_classes.is_empty());
    }

    #[test]
    fn a_score_that_only_crossed_the_threshold_is_a_shift_not_a_lost_box() {
        let b = vec![vec![
            det([0.0, 0.0, 10.0, 10.0], 0.2502, 0),
            det([20.0, 0.0, 30.0, 10.0], 0.6, 1),
            det([40.0, 0.0, 50.0, 10.0], 0.249, 2),
        ]];
        // Box 0 fell just below 0.25, box 1 to 0.245 (both still candidates, so both pair as
        // shifts); box 2 rose above 0.25 where B has it just below (no box only A has).
        let a = vec![vec![
            det([0.0, 0.0, 10.0, 10.0], 0.2498, 0),
            det([20.0, 0.0, 30.0, 10.0], 0.245, 1),
            det([40.0, 0.0, 50.0, 10.0], 0.2501, 2),
        ]];
        let r = agreement_above(&a, &b, 0.25).unwrap();
        assert_eq!((r.boxes_a, r.boxes_b), (1, 2));
        assert_eq!(r.matched_50_pct, Some(100.0));
        assert_eq!((r.only_a, r.only_b), (0, 0));
        assert!(
            close(r.score_shift_mean, (-0.0004 - 0.355) / 2.0, 1e-6),
            "{r:?}"
        );
        // Strictly at 0.25, A has lost boxes 0 and 1 and gained box 2.
        let strict = |side: &[Vec<Detection>]| -> Vec<Vec<Detection>> {
            side.iter()
                .map(|i| i.iter().filter(|d| d.score >= 0.25).copied().collect())
                .collect()
        };
        let r = agreement(&strict(&a), &strict(&b)).unwrap();
        assert_eq!((r.only_a, r.only_b), (1, 2));
    }

    #[test]
    fn shifted_and_missing_boxes_are_counted() {
        let a = vec![
            vec![
                det([0.0, 0.0, 10.0, 10.0], 0.9, 0),
                det([20.0, 0.0, 30.0, 10.0], 0.8, 0),
                det([0.0, 20.0, 10.0, 30.0], 0.7, 1),
            ],
            vec![det([0.0, 0.0, 10.0, 10.0], 0.6, 2)],
        ];
        let b = vec![
            vec![
                det([0.0, 0.0, 10.0, 10.0], 0.85, 0),
                // Shifted by 2.5: IoU 75 / 125 = 0.6, a match at 0.5 but not at 0.75.
                det([22.5, 0.0, 32.5, 10.0], 0.8, 0),
                // A's class-1 box has no counterpart.
            ],
            vec![det([0.0, 0.0, 10.0, 10.0], 0.7, 2)],
        ];
        let r = agreement(&a, &b).unwrap();
        assert_eq!((r.boxes_a, r.boxes_b), (4, 3));
        assert_eq!(r.matched_50_pct, Some(100.0));
        assert!(close(r.matched_75_pct, 200.0 / 3.0, 1e-9));
        assert_eq!((r.only_a, r.only_b), (1, 0));
        // Shifts +0.05, 0 and -0.1.
        assert!(close(r.score_shift_mean, -0.05 / 3.0, 1e-6), "{r:?}");
        assert!(close(r.score_shift_mean_abs, 0.05, 1e-6));
        assert!(close(r.score_shift_max_abs, 0.1, 1e-6));
        assert!(close(r.matched_iou_mean, 2.6 / 3.0, 1e-12));
        assert_eq!(
            r.worst_classes,
            vec![ClassMismatch {
                class: 1,
                only_a: 1,
                only_b: 0
            }]
        );
        // Class 0 has AP 1 up to IoU 0.6 and 51/101 above (the shifted box becomes a false
        // positive), so AP50:95 = (3 + 7 · 51/101) / 10 = 66/101; class 2 has AP 1, and
        // class 1 has no reference box so it is left out.
        assert_eq!(r.map50, Some(1.0));
        assert!(
            close(r.map50_95, (66.0 / 101.0 + 1.0) / 2.0, 1e-12),
            "{r:?}"
        );
    }

    #[test]
    fn greedy_matching_goes_best_score_first() {
        let b = vec![
            det([0.0, 0.0, 10.0, 10.0], 0.5, 0),
            det([2.0, 0.0, 12.0, 10.0], 0.5, 0),
            det([0.0, 0.0, 10.0, 10.0], 0.5, 1),
        ];
        let a = vec![
            // IoU 70/130 = 0.54 with b[0] and 90/110 = 0.82 with b[1]; the better-scored
            // box below goes first and takes b[1], so this one falls back to b[0].
            det([3.0, 0.0, 13.0, 10.0], 0.3, 0),
            det([2.0, 0.0, 12.0, 10.0], 0.9, 0),
            det([50.0, 50.0, 60.0, 60.0], 0.8, 0),
        ];
        assert_eq!(match_image(&a, &b, 0.5), vec![Some(0), Some(1), None]);
        // At 0.7 the fallback is not close enough.
        assert_eq!(match_image(&a, &b, 0.7), vec![None, Some(1), None]);
        let r = agreement(&[a], &[b]).unwrap();
        assert_eq!((r.only_a, r.only_b), (1, 1));
        assert_eq!(r.worst_classes.len(), 2);
        assert_eq!(r.worst_classes[0].class, 0);
    }

    #[test]
    fn empty_sides_and_bad_input() {
        let a = images();
        let none = vec![Vec::new(); 3];
        let r = agreement(&a, &none).unwrap();
        assert_eq!(
            (r.matched_50_pct, r.map50, r.score_shift_mean),
            (None, None, None)
        );
        assert_eq!(r.only_a, 5);
        assert_eq!(r.worst_classes[0].class, 0);
        let r = agreement(&none, &a).unwrap();
        assert_eq!(r.matched_50_pct, Some(0.0));
        assert_eq!((r.map50, r.only_b), (Some(0.0), 5));
        let e = agreement(&a, &a[..2]).unwrap_err().to_string();
        assert!(e.contains("3 images") && e.contains("covers 2"), "{e}");
        let mut b = images();
        b[1][0].score = f32::INFINITY;
        let e = agreement(&a, &b).unwrap_err().to_string();
        assert!(e.contains("image 1, detection 0 of the reference"), "{e}");
    }

    /// A small deterministic generator for the timing test (SplitMix64).
    struct Rng(u64);

    impl Rng {
        fn uniform(&mut self) -> f32 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
        }
    }

    /// A random anchors-first head; `sparse` makes objectness mostly small, as in real
    /// models.
    fn random_head(images: usize, anchors: usize, classes: usize, sparse: bool) -> Vec<f32> {
        let mut rng = Rng(7);
        let mut data = Vec::with_capacity(images * anchors * (5 + classes));
        for _ in 0..images * anchors {
            data.push(rng.uniform() * 640.0);
            data.push(rng.uniform() * 640.0);
            data.push(8.0 + rng.uniform() * 120.0);
            data.push(8.0 + rng.uniform() * 120.0);
            let u = rng.uniform();
            data.push(if sparse { u.powi(12) } else { u });
            data.extend((0..classes).map(|_| rng.uniform()));
        }
        data
    }

    /// Turns an anchors-first head into the anchors-last layout, folding objectness into
    /// the class scores.
    fn to_anchors_last(data: &[f32], images: usize, anchors: usize, k: usize) -> Vec<f32> {
        let mut out = vec![0.0; images * anchors * (k - 1)];
        for (i, image) in data.chunks_exact(anchors * k).enumerate() {
            let dst = &mut out[i * anchors * (k - 1)..(i + 1) * anchors * (k - 1)];
            for (a, row) in image.chunks_exact(k).enumerate() {
                for c in 0..4 {
                    dst[c * anchors + a] = row[c];
                }
                for c in 5..k {
                    dst[(c - 1) * anchors + a] = row[4] * row[c];
                }
            }
        }
        out
    }

    /// Best-of-`reps` times of decoding two heads (per head) and comparing them.
    fn time_case(
        a: &[f32],
        b: &[f32],
        shape: &[usize],
        opts: &DecodeOptions,
    ) -> (f64, f64, Vec<Vec<Detection>>, DetectionAgreement) {
        let mut best = (f64::INFINITY, f64::INFINITY);
        let mut last = None;
        for _ in 0..10 {
            let start = Instant::now();
            let da = decode_head(a, shape, opts).unwrap();
            let db = decode_head(b, shape, opts).unwrap();
            let decoded = start.elapsed().as_secs_f64() / 2.0;
            let start = Instant::now();
            let r = agreement(&da, &db).unwrap();
            best = (
                best.0.min(decoded),
                best.1.min(start.elapsed().as_secs_f64()),
            );
            last = Some((da, r));
        }
        let (da, r) = last.unwrap();
        (best.0, best.1, da, r)
    }

    /// Decode, NMS and matching of 64 images × 6,300 anchors × 80 classes, in both layouts.
    /// Run with `cargo test --release -- --ignored --nocapture speed`.
    #[test]
    #[ignore]
    fn speed_of_64_images() {
        let (n, anchors, classes) = (64, 6300, 80);
        let k = 5 + classes;
        for (label, sparse, conf) in [
            ("sparse, conf 0.25", true, 0.25),
            ("dense, conf 0.001", false, 0.001),
        ] {
            let a = random_head(n, anchors, classes, sparse);
            let mut rng = Rng(11);
            let b: Vec<f32> = a
                .iter()
                .map(|v| v * (1.0 + 0.02 * (rng.uniform() - 0.5)))
                .collect();
            let mut opts = DecodeOptions::new(HeadLayout::AnchorsFirst);
            opts.conf = conf;
            let first = time_case(&a, &b, &[n, anchors, k], &opts);
            opts.layout = HeadLayout::AnchorsLast;
            let (a_last, b_last) = (
                to_anchors_last(&a, n, anchors, k),
                to_anchors_last(&b, n, anchors, k),
            );
            let last = time_case(&a_last, &b_last, &[n, k - 1, anchors], &opts);
            for (layout, (decode, compare, dets, r)) in
                [("anchors-first", &first), ("anchors-last", &last)]
            {
                println!(
                    "{label}, {layout}: decode+NMS {:.1} ms per head of 64 images, agreement {:.1} ms; \
                     {} boxes, matched@0.5 {:.1}%, mAP50 {:.3}",
                    decode * 1e3,
                    compare * 1e3,
                    dets.iter().map(Vec::len).sum::<usize>(),
                    r.matched_50_pct.unwrap(),
                    r.map50.unwrap()
                );
                assert!(r.matched_50_pct.unwrap() > 50.0);
            }
            // Folding objectness into the class scores gives the same boxes, up to rounding
            // of the products.
            let same = first.2.iter().flatten().zip(last.2.iter().flatten());
            let differ = same
                .filter(|(x, y)| x.class != y.class || (x.score - y.score).abs() > 1e-6)
                .count();
            assert!(differ <= 5, "{differ} boxes differ between the layouts");
        }
    }

    /// A detector's boxes against themselves, 4 images × 300 boxes in 80 classes: a crowded
    /// class with 150 overlapping boxes per image (more than COCO's 100 per image and class),
    /// scores in steps of 0.05 (many ties), an exact duplicate box. Identical predictions agree
    /// exactly: every mAP is 1.
    #[test]
    fn a_detector_compared_with_itself_has_map_exactly_one() {
        let mut rng = Rng(3);
        let images: Vec<Vec<Detection>> = (0..4)
            .map(|_| {
                let mut image: Vec<Detection> = (0..150)
                    .map(|k| {
                        let (x, y) = ((k % 15) as f32 * 30.0, (k / 15) as f32 * 30.0);
                        let score = 0.25 + (rng.uniform() * 15.0).floor() * 0.05;
                        det([x, y, x + 40.0, y + 40.0], score, 0)
                    })
                    .collect();
                image.extend((0..149).map(|k| {
                    let (x, y, w) = (rng.uniform() * 600.0, rng.uniform() * 600.0, rng.uniform());
                    let score = 0.25 + (rng.uniform() * 15.0).floor() * 0.05;
                    det([x, y, x + 8.0 + w * 100.0, y + 30.0], score, 1 + k % 79)
                }));
                image.push(image[3]);
                image
            })
            .collect();
        assert!(images.iter().all(|i| i.len() == 300));
        let r = agreement(&images, &images).unwrap();
        assert_eq!(r.matched_50_pct, Some(100.0));
        assert_eq!((r.map50, r.map50_95), (Some(1.0), Some(1.0)));
        assert_eq!((r.only_a, r.only_b), (0, 0));
    }
}
