//! Greedy non-maximum suppression within each class: of two boxes of the same class that
//! overlap too much, only the more confident one is kept.

use std::collections::HashMap;

use super::boxes::{area, by_score_desc, Detection};

/// Keeps, for each class, the boxes that no better box of that class overlaps with an IoU
/// above `iou`; returns them best score first, at most `max` of them.
///
/// Boxes are visited best score first (equal scores keep their input order); a box is
/// dropped when its IoU with an already kept box of the same class is above `iou`. Whether
/// a box is kept depends only on better boxes, so the walk stops once `max` are kept, and
/// only as many candidates are put in order as the walk reaches.
pub(crate) fn class_aware(dets: Vec<Detection>, iou: f32, max: usize) -> Vec<Detection> {
    if max == 0 || dets.is_empty() {
        return Vec::new();
    }
    // Score first, input order on ties: a total order, so unstable sorts give one answer.
    let order = |a: &(usize, Detection), b: &(usize, Detection)| {
        by_score_desc(&a.1, &b.1).then(a.0.cmp(&b.0))
    };
    let mut items: Vec<(usize, Detection)> = dets.into_iter().enumerate().collect();
    let mut kept = Vec::with_capacity(max.min(items.len()));
    // Per class: the kept boxes and their areas.
    let mut by_class: HashMap<usize, Vec<([f32; 4], f32)>> = HashMap::new();
    let mut rest = &mut items[..];
    let mut batch = max.saturating_mul(4).max(256);
    while !rest.is_empty() {
        let take = batch.min(rest.len());
        if take < rest.len() {
            rest.select_nth_unstable_by(take - 1, order);
        }
        let (head, tail) = rest.split_at_mut(take);
        head.sort_unstable_by(order);
        for (_, d) in head.iter() {
            let d_area = area(&d.bbox);
            let class_kept = by_class.entry(d.class).or_default();
            if class_kept
                .iter()
                .any(|(k, k_area)| overlap(k, *k_area, &d.bbox, d_area) > iou)
            {
                continue;
            }
            class_kept.push((d.bbox, d_area));
            kept.push(*d);
            if kept.len() == max {
                return kept;
            }
        }
        rest = tail;
        batch = batch.saturating_mul(2);
    }
    kept
}

/// IoU of two corner boxes whose areas are already known; 0 for an empty union.
fn overlap(a: &[f32; 4], a_area: f32, b: &[f32; 4], b_area: f32) -> f32 {
    let w = a[2].min(b[2]) - a[0].max(b[0]);
    let h = a[3].min(b[3]) - a[1].max(b[1]);
    if !(w > 0.0 && h > 0.0) {
        return 0.0;
    }
    let inter = w * h;
    let union = a_area + b_area - inter;
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(bbox: [f32; 4], score: f32, class: usize) -> Detection {
        Detection { bbox, score, class }
    }

    #[test]
    fn suppresses_overlapping_boxes_of_one_class() {
        let dets = vec![
            det([0.0, 0.0, 10.0, 10.0], 0.8, 0),
            // IoU 90 / 110 with the first box: suppressed.
            det([1.0, 0.0, 11.0, 10.0], 0.7, 0),
            det([0.0, 0.0, 10.0, 10.0], 0.9, 0),
            // IoU 1/3 with the best box: kept at threshold 0.45.
            det([5.0, 0.0, 15.0, 10.0], 0.6, 0),
        ];
        let kept = class_aware(dets, 0.45, 100);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].score, 0.9);
        assert_eq!(kept[1].bbox, [5.0, 0.0, 15.0, 10.0]);
        // At threshold 0.3 the box at IoU 1/3 goes too.
        let kept = class_aware(
            vec![
                det([0.0, 0.0, 10.0, 10.0], 0.9, 0),
                det([5.0, 0.0, 15.0, 10.0], 0.6, 0),
            ],
            0.3,
            100,
        );
        assert_eq!(kept.len(), 1);
    }

    #[test]
    fn keeps_overlapping_boxes_of_different_classes() {
        let dets = vec![
            det([0.0, 0.0, 10.0, 10.0], 0.5, 2),
            det([0.0, 0.0, 10.0, 10.0], 0.9, 1),
            det([0.0, 0.0, 10.0, 10.0], 0.7, 2),
        ];
        let kept = class_aware(dets, 0.5, 100);
        let got: Vec<(usize, f32)> = kept.iter().map(|d| (d.class, d.score)).collect();
        assert_eq!(got, vec![(1, 0.9), (2, 0.7)]);
    }

    #[test]
    fn truncates_to_max_best_first() {
        let dets: Vec<Detection> = (0..10)
            .map(|i| {
                let x = 20.0 * i as f32;
                det([x, 0.0, x + 10.0, 10.0], i as f32 / 20.0, i % 3)
            })
            .collect();
        let kept = class_aware(dets.clone(), 0.5, 4);
        let scores: Vec<f32> = kept.iter().map(|d| d.score).collect();
        assert_eq!(scores, vec![0.45, 0.4, 0.35, 0.3]);
        assert_eq!(class_aware(dets.clone(), 0.5, 100).len(), 10);
        assert!(class_aware(dets, 0.5, 0).is_empty());
    }

    /// The plain algorithm: one stable sort, then every box in turn.
    fn reference(mut dets: Vec<Detection>, iou: f32, max: usize) -> Vec<Detection> {
        dets.sort_by(by_score_desc);
        let mut kept: Vec<Detection> = Vec::new();
        for d in dets {
            let hit = kept.iter().any(|k| {
                k.class == d.class && overlap(&k.bbox, area(&k.bbox), &d.bbox, area(&d.bbox)) > iou
            });
            if !hit {
                kept.push(d);
            }
        }
        kept.truncate(max);
        kept
    }

    #[test]
    fn matches_the_plain_algorithm_on_many_boxes() {
        // 3,000 boxes on a small canvas, so many overlap; scores on a coarse grid, so many
        // tie, which checks that ties keep their input order across batches.
        let mut x: u64 = 12345;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let mut boxes = |canvas: u64, size: f32| -> Vec<Detection> {
            (0..3000)
                .map(|_| {
                    let (x1, y1) = (next(canvas) as f32, next(canvas) as f32);
                    let (w, h) = (size + next(40) as f32, size + next(40) as f32);
                    det(
                        [x1, y1, x1 + w, y1 + h],
                        next(50) as f32 / 50.0,
                        next(4) as usize,
                    )
                })
                .collect()
        };
        let (spread, crowded) = (boxes(200, 1.0), boxes(10, 40.0));
        for dets in [&spread, &crowded] {
            for max in [1, 10, 100, 300, 5000] {
                let got = class_aware(dets.clone(), 0.45, max);
                assert_eq!(got, reference(dets.clone(), 0.45, max), "max {max}");
                assert!(got.len() <= max);
            }
        }
        assert!(class_aware(spread, 0.45, 5000).len() > 300);
        // Few boxes survive on the crowded canvas, so with max 100 the walk goes through
        // every batch of candidates (400, then 800, then the rest).
        assert!(class_aware(crowded, 0.45, 5000).len() < 100);
    }

    #[test]
    fn identical_boxes_suppress_even_at_threshold_one_minus() {
        let dets = vec![
            det([0.0, 0.0, 10.0, 10.0], 0.9, 0),
            det([0.0, 0.0, 10.0, 10.0], 0.8, 0),
        ];
        assert_eq!(class_aware(dets.clone(), 0.99, 10).len(), 1);
        // Nothing is above an IoU threshold of 1.
        assert_eq!(class_aware(dets, 1.0, 10).len(), 2);
    }
}
