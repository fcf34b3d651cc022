//! Greedy non-maximum suppression within each class: of two boxes of the same class that
//! overlap too much, only the more confident one is kept.

use std::collections::HashMap;

use super::boxes::{area, by_score_desc, Detection};

/// Keeps, for each class, the boxes that no better box of that class overlaps with an IoU
/// above `iou`; returns them best score first, at most `max` of them.
///
/// Boxes are visited best score first (equal scores keep their input order); a box is
/// dropped when its IoU with an already kept box of the same class is above `iou`. Whether
/// a box is kept depends only on better boxes, so the walk stops once `max` are kept.
pub fn class_aware(mut dets: Vec<Detection>, iou: f32, max: usize) -> Vec<Detection> {
    if max == 0 || dets.is_empty() {
        return Vec::new();
    }
    dets.sort_by(by_score_desc);
    let mut kept = Vec::with_capacity(max.min(dets.len()));
    // Per class: the kept boxes and their areas.
    let mut by_class: HashMap<usize, Vec<([f32; 4], f32)>> = HashMap::new();
    for d in dets {
        let d_area = area(&d.bbox);
        let class_kept = by_class.entry(d.class).or_default();
        if class_kept
            .iter()
            .any(|(k, k_area)| overlap(k, *k_area, &d.bbox, d_area) > iou)
        {
            continue;
        }
        class_kept.push((d.bbox, d_area));
        kept.push(d);
        if kept.len() == max {
            break;
        }
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
