//! COCO-style mean average precision for boxes, computed the way pycocotools' `COCOeval`
//! does for `iouType="bbox"`, area range "all" and a given number of detections per image.
//!
//! For every class and each IoU threshold 0.50, 0.55, …, 0.95, detections are matched
//! greedily to ground truth image by image, then pooled over images best score first; the
//! precision/recall curve is made non-increasing and read at the 101 recall points
//! 0, 0.01, …, 1. A class's AP is the mean of those 101 precisions, and mAP the mean over
//! the classes that have at least one ground-truth box that is not a crowd region.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use anyhow::{bail, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::boxes::{area64, by_score_desc, intersection64, Detection};

/// How many IoU thresholds COCO evaluates at.
const THRESHOLDS: usize = 10;
/// How many recall points each precision curve is read at.
const RECALL_POINTS: usize = 101;

/// One ground-truth object.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroundTruth {
    /// Box corners `[x1, y1, x2, y2]`.
    pub bbox: [f32; 4],
    /// Class index, counting from 0.
    pub class: usize,
    /// A crowd region: detections inside it are neither rewarded nor penalised, and it does
    /// not count towards recall.
    pub(crate) crowd: bool,
}

/// Average precision of one class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ClassAp {
    /// Class index.
    pub class: usize,
    /// Ground-truth boxes of this class that are not crowd regions.
    pub ground_truths: usize,
    /// Detections of this class that were evaluated (at most the per-image limit in each
    /// image), those inside crowd regions included.
    pub detections: usize,
    /// AP at IoU 0.5.
    pub(crate) ap50: f64,
    /// AP at IoU 0.75.
    pub(crate) ap75: f64,
    /// AP averaged over the IoU thresholds 0.50, 0.55, …, 0.95.
    pub(crate) ap50_95: f64,
}

/// Mean average precision over classes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeanAp {
    /// mAP at IoU 0.5 (COCOeval's `stats[1]`).
    pub map50: f64,
    /// mAP at IoU 0.75 (COCOeval's `stats[2]`).
    pub map75: f64,
    /// mAP averaged over IoU 0.50:0.95 (COCOeval's `stats[0]`).
    pub map50_95: f64,
    /// Classes in the mean: those with at least one ground-truth box that is not a crowd
    /// region. When there are none, every mAP is 0 (pycocotools reports -1 there).
    pub classes: usize,
    /// The classes in the mean, by class index.
    pub(crate) per_class: Vec<ClassAp>,
}

/// The ten IoU thresholds 0.50, 0.55, …, 0.95, computed as `numpy.linspace` computes them
/// for COCOeval, so that an IoU right at a threshold falls on the same side as there.
pub(crate) fn iou_thresholds() -> [f64; THRESHOLDS] {
    let step = (0.95f64 - 0.5) / 9.0;
    let mut t = [0.0; THRESHOLDS];
    for (i, v) in t.iter_mut().enumerate() {
        *v = i as f64 * step + 0.5;
    }
    t[THRESHOLDS - 1] = 0.95;
    t
}

/// The 101 recall points 0, 0.01, …, 1, computed as `numpy.linspace` computes them.
pub(crate) fn recall_points() -> [f64; RECALL_POINTS] {
    let mut r = [0.0; RECALL_POINTS];
    for (i, v) in r.iter_mut().enumerate() {
        *v = i as f64 * 0.01;
    }
    r[RECALL_POINTS - 1] = 1.0;
    r
}

/// Evaluates detections against ground truth, both given image by image, keeping at most
/// `max_dets` detections per image and class (COCO's default is 100).
///
/// Matches pycocotools' COCOeval for bounding boxes with area range "all", except that
/// precision is `tp / (tp + fp)` without COCO's tiny epsilon, so a perfect result is
/// exactly 1 (the two differ by less than 1e-15).
pub fn evaluate(
    gts: &[Vec<GroundTruth>],
    dets: &[Vec<Detection>],
    max_dets: usize,
) -> Result<MeanAp> {
    if gts.len() != dets.len() {
        bail!(
            "ground truth covers {} images but the detections cover {}",
            gts.len(),
            dets.len()
        );
    }
    for (i, image) in dets.iter().enumerate() {
        if let Some((j, d)) = image.iter().enumerate().find(|(_, d)| !d.score.is_finite()) {
            bail!("image {i}, detection {j}: score {} is not finite", d.score);
        }
    }
    let thresholds = iou_thresholds();
    let records: Vec<Vec<ImageClass>> = gts
        .par_iter()
        .zip(dets.par_iter())
        .map(|(g, d)| evaluate_image(g, d, max_dets, &thresholds))
        .collect();
    let mut by_class: BTreeMap<usize, Vec<&ImageClass>> = BTreeMap::new();
    for record in records.iter().flatten() {
        by_class.entry(record.class).or_default().push(record);
    }
    let recall = recall_points();
    let per_class: Vec<ClassAp> = by_class
        .iter()
        .filter_map(|(&class, records)| class_ap(class, records, &recall))
        .collect();
    let classes = per_class.len();
    let mean = |ap: fn(&ClassAp) -> f64| {
        if classes == 0 {
            0.0
        } else {
            per_class.iter().map(ap).sum::<f64>() / classes as f64
        }
    };
    Ok(MeanAp {
        map50: mean(|c| c.ap50),
        map75: mean(|c| c.ap75),
        map50_95: mean(|c| c.ap50_95),
        classes,
        per_class,
    })
}

/// The outcome of one class in one image: its evaluated detections, best first, with one
/// bit per IoU threshold saying whether each was matched and whether it is ignored.
struct ImageClass {
    class: usize,
    scores: Vec<f32>,
    matched: Vec<u16>,
    ignored: Vec<u16>,
    ground_truths: usize,
}

/// Splits one image by class and matches each class.
fn evaluate_image(
    gts: &[GroundTruth],
    dets: &[Detection],
    max_dets: usize,
    thresholds: &[f64; THRESHOLDS],
) -> Vec<ImageClass> {
    let mut groups: BTreeMap<usize, (Vec<GroundTruth>, Vec<Detection>)> = BTreeMap::new();
    for g in gts {
        groups.entry(g.class).or_default().0.push(*g);
    }
    for d in dets {
        groups.entry(d.class).or_default().1.push(*d);
    }
    groups
        .into_iter()
        .map(|(class, (g, d))| match_class(class, g, d, max_dets, thresholds))
        .collect()
}

/// COCOeval's `evaluateImg` for one image and class.
fn match_class(
    class: usize,
    mut gts: Vec<GroundTruth>,
    mut dets: Vec<Detection>,
    max_dets: usize,
    thresholds: &[f64; THRESHOLDS],
) -> ImageClass {
    dets.sort_by(by_score_desc);
    dets.truncate(max_dets);
    // Regular boxes first, crowd regions last, each group in input order.
    gts.sort_by_key(|g| g.crowd);
    let mut matched = vec![0u16; dets.len()];
    let mut ignored = vec![0u16; dets.len()];
    if !gts.is_empty() {
        let ious: Vec<f64> = dets
            .iter()
            .flat_map(|d| gts.iter().map(move |g| overlap(d, g)))
            .collect();
        let mut taken = vec![0u16; gts.len()];
        for (t, &threshold) in thresholds.iter().enumerate() {
            let bit = 1u16 << t;
            for (di, row) in ious.chunks_exact(gts.len()).enumerate() {
                if let Some(gi) = best_gt(row, &gts, &taken, bit, threshold) {
                    matched[di] |= bit;
                    taken[gi] |= bit;
                    if gts[gi].crowd {
                        ignored[di] |= bit;
                    }
                }
            }
        }
    }
    ImageClass {
        class,
        scores: dets.iter().map(|d| d.score).collect(),
        matched,
        ignored,
        ground_truths: gts.iter().filter(|g| !g.crowd).count(),
    }
}

/// The ground truth a detection takes at one threshold, following COCOeval: the best IoU
/// among the boxes not yet taken (crowd regions can be taken many times), the later box on
/// equal IoU, and never a crowd region once a regular box has matched.
fn best_gt(
    ious: &[f64],
    gts: &[GroundTruth],
    taken: &[u16],
    bit: u16,
    threshold: f64,
) -> Option<usize> {
    let mut best_iou = threshold.min(1.0 - 1e-10);
    let mut best = None;
    for (gi, (g, &iou)) in gts.iter().zip(ious).enumerate() {
        if taken[gi] & bit != 0 && !g.crowd {
            continue;
        }
        if best.is_some_and(|b: usize| !gts[b].crowd) && g.crowd {
            break;
        }
        if iou < best_iou {
            continue;
        }
        best_iou = iou;
        best = Some(gi);
    }
    best
}

/// IoU as COCO computes it for boxes; for a crowd region the union is the detection's area.
fn overlap(d: &Detection, g: &GroundTruth) -> f64 {
    let inter = intersection64(&d.bbox, &g.bbox);
    if inter <= 0.0 {
        return 0.0;
    }
    let union = if g.crowd {
        area64(&d.bbox)
    } else {
        area64(&d.bbox) + area64(&g.bbox) - inter
    };
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

/// COCOeval's `accumulate` for one class: pools the images' detections best score first
/// (earlier images first on equal scores) and reads AP at each threshold.
fn class_ap(
    class: usize,
    records: &[&ImageClass],
    recall: &[f64; RECALL_POINTS],
) -> Option<ClassAp> {
    let ground_truths: usize = records.iter().map(|r| r.ground_truths).sum();
    if ground_truths == 0 {
        return None;
    }
    let mut pooled: Vec<(f32, u16, u16)> = records
        .iter()
        .flat_map(|r| {
            r.scores
                .iter()
                .zip(&r.matched)
                .zip(&r.ignored)
                .map(|((&s, &m), &i)| (s, m, i))
        })
        .collect();
    pooled.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal));
    let mut ap = [0.0; THRESHOLDS];
    for (t, v) in ap.iter_mut().enumerate() {
        *v = average_precision(&pooled, 1 << t, ground_truths, recall);
    }
    Some(ClassAp {
        class,
        ground_truths,
        detections: pooled.len(),
        ap50: ap[0],
        ap75: ap[5],
        ap50_95: ap.iter().sum::<f64>() / THRESHOLDS as f64,
    })
}

/// AP at one threshold (`bit`) from pooled detections sorted best first.
fn average_precision(
    pooled: &[(f32, u16, u16)],
    bit: u16,
    ground_truths: usize,
    recall: &[f64; RECALL_POINTS],
) -> f64 {
    let (mut tp, mut fp) = (0usize, 0usize);
    let mut rc = Vec::with_capacity(pooled.len());
    let mut pr = Vec::with_capacity(pooled.len());
    for &(_, matched, ignored) in pooled {
        if ignored & bit == 0 {
            if matched & bit != 0 {
                tp += 1;
            } else {
                fp += 1;
            }
        }
        rc.push(tp as f64 / ground_truths as f64);
        pr.push(if tp + fp == 0 {
            0.0
        } else {
            tp as f64 / (tp + fp) as f64
        });
    }
    for i in (1..pr.len()).rev() {
        if pr[i] > pr[i - 1] {
            pr[i - 1] = pr[i];
        }
    }
    let mut sum = 0.0;
    for &r in recall {
        // First index whose recall reaches r; past the end the precision is 0.
        match pr.get(rc.partition_point(|&x| x < r)) {
            Some(p) => sum += p,
            None => break,
        }
    }
    sum / RECALL_POINTS as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gt(image: usize, b: [f32; 4], class: usize, crowd: bool) -> (usize, GroundTruth) {
        (
            image,
            GroundTruth {
                bbox: b,
                class,
                crowd,
            },
        )
    }

    fn det(image: usize, b: [f32; 4], score: f32, class: usize) -> (usize, Detection) {
        (
            image,
            Detection {
                bbox: b,
                score,
                class,
            },
        )
    }

    /// Spreads `(image, item)` pairs into one list per image.
    fn per_image<T: Copy>(images: usize, items: &[(usize, T)]) -> Vec<Vec<T>> {
        let mut out = vec![Vec::new(); images];
        for &(i, item) in items {
            out[i].push(item);
        }
        out
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn thresholds_are_numpys() {
        let t = iou_thresholds();
        // Values numpy 2.4's linspace gives for COCOeval's iouThrs.
        assert_eq!(t[0], 0.5);
        assert_eq!(t[2], 0.6);
        assert_eq!(t[4], 0.7);
        assert_eq!(t[9], 0.95);
        for (i, v) in t.iter().enumerate() {
            assert!(close(*v, 0.5 + 0.05 * i as f64, 1e-12));
        }
        let r = recall_points();
        assert_eq!((r[0], r[50], r[100]), (0.0, 0.5, 1.0));
    }

    /// One image, two classes, worked out by hand (pycocotools agrees: see pyref/).
    ///
    /// Class 0: ground truth G1 = [0,0,10,10] and G2 = [20,20,30,30]. Detections, best first:
    /// D1 = G1 (0.9), D2 = G1 again (0.8, a duplicate), D3 = [20,20,32,30] (0.7), whose IoU
    /// with G2 is 100 / 120 = 0.833.
    /// - IoU 0.50 … 0.80 (7 thresholds): TP, FP, TP. Recall 0.5, 0.5, 1; precision 1, 1/2,
    ///   2/3, made non-increasing: 1, 2/3, 2/3. Recall points 0 … 0.50 (51 of them) read 1,
    ///   0.51 … 1 (50) read 2/3: AP = (51 + 50 · 2/3) / 101 = 253/303.
    /// - IoU 0.85 … 0.95 (3 thresholds): TP, FP, FP. Recall stays at 0.5: the 51 points up
    ///   to 0.5 read 1, the rest 0: AP = 51/101 = 153/303.
    /// - AP50 = AP75 = 253/303; AP50:95 = (7 · 253 + 3 · 153) / 3030 = 223/303.
    ///
    /// Class 1: ground truth [50,50,60,60] and [70,70,80,80], one exact detection of the
    /// first, the second missed: recall 0.5 at precision 1 at every threshold, AP = 153/303.
    ///
    /// mAP50 = (253 + 153) / 606 = 203/303; mAP50:95 = (223 + 153) / 606 = 188/303.
    #[test]
    fn hand_computed_case() {
        let gts = per_image(
            1,
            &[
                gt(0, [0.0, 0.0, 10.0, 10.0], 0, false),
                gt(0, [20.0, 20.0, 30.0, 30.0], 0, false),
                gt(0, [50.0, 50.0, 60.0, 60.0], 1, false),
                gt(0, [70.0, 70.0, 80.0, 80.0], 1, false),
            ],
        );
        let dets = per_image(
            1,
            &[
                det(0, [50.0, 50.0, 60.0, 60.0], 0.6, 1),
                det(0, [0.0, 0.0, 10.0, 10.0], 0.8, 0),
                det(0, [20.0, 20.0, 32.0, 30.0], 0.7, 0),
                det(0, [0.0, 0.0, 10.0, 10.0], 0.9, 0),
            ],
        );
        let m = evaluate(&gts, &dets, 100).unwrap();
        assert_eq!(m.classes, 2);
        let c0 = &m.per_class[0];
        assert_eq!((c0.class, c0.ground_truths, c0.detections), (0, 2, 3));
        assert!(close(c0.ap50, 253.0 / 303.0, 1e-12), "{}", c0.ap50);
        assert!(close(c0.ap75, 253.0 / 303.0, 1e-12));
        assert!(close(c0.ap50_95, 223.0 / 303.0, 1e-12), "{}", c0.ap50_95);
        assert!(close(m.per_class[1].ap50_95, 153.0 / 303.0, 1e-12));
        assert!(close(m.map50, 203.0 / 303.0, 1e-12), "{}", m.map50);
        assert!(close(m.map75, 203.0 / 303.0, 1e-12));
        assert!(close(m.map50_95, 188.0 / 303.0, 1e-12), "{}", m.map50_95);
        // Keeping one detection per image and class drops the duplicate and D3.
        let m1 = evaluate(&gts, &dets, 1).unwrap();
        assert!(close(m1.per_class[0].ap50, 51.0 / 101.0, 1e-12));
    }

    /// Three images, three classes: crowd regions (one partly overlapped, one beside a
    /// regular box that a detection inside the region matches up to IoU 0.778), boxes at many
    /// IoUs, duplicates, a tie in score across images, a detection of the wrong class, and
    /// class 2 with detections but no ground truth. The same case is in
    /// pyref/coco_case.py.
    fn reference_case() -> (Vec<Vec<GroundTruth>>, Vec<Vec<Detection>>) {
        let gts = per_image(
            3,
            &[
                gt(0, [10.0, 10.0, 50.0, 50.0], 0, false),
                gt(0, [60.0, 60.0, 100.0, 120.0], 0, false),
                gt(0, [0.0, 0.0, 30.0, 20.0], 1, false),
                gt(0, [100.0, 0.0, 200.0, 100.0], 0, true),
                gt(0, [95.0, 0.0, 135.0, 40.0], 0, false),
                gt(1, [0.0, 0.0, 40.0, 40.0], 0, false),
                gt(1, [50.0, 50.0, 90.0, 80.0], 1, false),
                gt(1, [100.0, 100.0, 130.0, 140.0], 1, false),
                gt(2, [10.0, 10.0, 20.0, 20.0], 1, false),
                gt(2, [200.0, 200.0, 260.0, 240.0], 1, true),
            ],
        );
        let dets = per_image(
            3,
            &[
                det(0, [12.0, 10.0, 52.0, 50.0], 0.95, 0),
                det(0, [100.0, 0.0, 140.0, 40.0], 0.9, 0),
                det(0, [60.0, 65.0, 100.0, 125.0], 0.85, 0),
                det(0, [110.0, 10.0, 150.0, 60.0], 0.80, 0),
                det(0, [150.0, 50.0, 190.0, 90.0], 0.78, 0),
                det(0, [300.0, 300.0, 320.0, 320.0], 0.70, 0),
                det(0, [90.0, 0.0, 130.0, 40.0], 0.65, 0),
                det(0, [0.0, 0.0, 30.0, 20.0], 0.60, 1),
                det(0, [5.0, 0.0, 35.0, 20.0], 0.50, 1),
                det(0, [10.0, 10.0, 40.0, 40.0], 0.90, 2),
                det(1, [0.0, 0.0, 40.0, 40.0], 0.55, 0),
                det(1, [2.0, 0.0, 42.0, 40.0], 0.45, 0),
                det(1, [52.0, 52.0, 92.0, 82.0], 0.50, 1),
                det(1, [100.0, 105.0, 130.0, 145.0], 0.40, 1),
                det(1, [0.0, 0.0, 10.0, 10.0], 0.30, 1),
                det(1, [60.0, 60.0, 70.0, 70.0], 0.35, 2),
                det(2, [10.0, 10.0, 20.0, 20.0], 0.90, 0),
                det(2, [11.0, 11.0, 21.0, 21.0], 0.20, 1),
                det(2, [210.0, 210.0, 250.0, 230.0], 0.25, 1),
                det(2, [10.5, 10.0, 20.5, 20.0], 0.15, 1),
                det(2, [0.0, 0.0, 5.0, 5.0], 0.20, 2),
            ],
        );
        (gts, dets)
    }

    #[test]
    fn matches_pycocotools() {
        let (gts, dets) = reference_case();
        // pycocotools 2.0.11's COCOeval (numpy 2.4) on this case: stats[0] and stats[1],
        // and per class the means of eval["precision"] at area "all", maxDets 100.
        let m = evaluate(&gts, &dets, 100).unwrap();
        assert!(
            close(m.map50_95, 0.6179867986798679, 1e-9),
            "{}",
            m.map50_95
        );
        assert!(close(m.map50, 0.8246699669966997, 1e-9), "{}", m.map50);
        assert_eq!(m.classes, 2);
        let want = [
            (0.8556105610561057, 0.8556105610561057, 0.6402640264026402),
            (0.7937293729372937, 0.7701555869872699, 0.5957095709570956),
        ];
        for (c, w) in m.per_class.iter().zip(want) {
            assert!(close(c.ap50, w.0, 1e-9), "class {}: {}", c.class, c.ap50);
            assert!(close(c.ap75, w.1, 1e-9), "class {}: {}", c.class, c.ap75);
            assert!(
                close(c.ap50_95, w.2, 1e-9),
                "class {}: {}",
                c.class,
                c.ap50_95
            );
        }
        assert_eq!(m.per_class[0].ground_truths, 4);
        assert_eq!(m.per_class[1].ground_truths, 4);
        // The same with maxDets [1, 2, 3]: three detections per image and class.
        let m = evaluate(&gts, &dets, 3).unwrap();
        assert!(close(m.map50_95, 0.640924092409241, 1e-9), "{}", m.map50_95);
        assert!(close(m.map50, 0.8473597359735975, 1e-9), "{}", m.map50);
        assert!(close(m.per_class[0].ap50_95, 0.6861386138613862, 1e-9));
    }

    #[test]
    fn detections_inside_crowd_regions_are_ignored() {
        let gts = per_image(
            1,
            &[
                gt(0, [0.0, 0.0, 10.0, 10.0], 0, false),
                gt(0, [100.0, 100.0, 200.0, 200.0], 0, true),
            ],
        );
        let mut dets = per_image(
            1,
            &[
                det(0, [110.0, 110.0, 120.0, 120.0], 0.9, 0),
                det(0, [150.0, 150.0, 170.0, 170.0], 0.8, 0),
                det(0, [0.0, 0.0, 10.0, 10.0], 0.7, 0),
            ],
        );
        let m = evaluate(&gts, &dets, 100).unwrap();
        assert_eq!(m.map50_95, 1.0);
        assert_eq!(m.per_class[0].ground_truths, 1);
        // Half of this box lies outside the crowd region: at IoU 0.5 it is ignored, above
        // that it is a false positive ranked first, and AP drops.
        dets[0].push(det(0, [90.0, 100.0, 110.0, 120.0], 0.95, 0).1);
        let m = evaluate(&gts, &dets, 100).unwrap();
        assert_eq!(m.map50, 1.0);
        assert!(close(m.map75, 0.5, 1e-12), "{}", m.map75);
    }

    #[test]
    fn perfect_and_empty_results() {
        let gts = per_image(2, &[gt(1, [0.0, 0.0, 5.0, 5.0], 3, false)]);
        let dets = per_image(2, &[det(1, [0.0, 0.0, 5.0, 5.0], 0.3, 3)]);
        let m = evaluate(&gts, &dets, 100).unwrap();
        assert_eq!(
            (m.map50, m.map75, m.map50_95, m.classes),
            (1.0, 1.0, 1.0, 1)
        );
        // Nothing detected: AP 0, the class still counts.
        let m = evaluate(&gts, &[vec![], vec![]], 100).unwrap();
        assert_eq!((m.map50_95, m.classes), (0.0, 1));
        // No ground truth at all: no class in the mean.
        let m = evaluate(&[vec![], vec![]], &dets, 100).unwrap();
        assert_eq!((m.map50, m.classes), (0.0, 0));
        assert!(m.per_class.is_empty());
    }

    #[test]
    fn bad_input_is_an_error() {
        let e = evaluate(&[vec![]], &[vec![], vec![]], 100).unwrap_err();
        assert!(e.to_string().contains("1 images") && e.to_string().contains("cover 2"));
        let dets = per_image(1, &[det(0, [0.0, 0.0, 1.0, 1.0], f32::NAN, 0)]);
        let e = evaluate(&[vec![]], &dets, 100).unwrap_err().to_string();
        assert!(
            e.contains("image 0, detection 0") && e.contains("NaN"),
            "{e}"
        );
    }
}
