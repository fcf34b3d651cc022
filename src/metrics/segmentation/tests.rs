//! Tests of the segmentation metrics: argmax, confusion counts, IoU and the agreement summary.

use super::*;

/// A 32×32 map with class 0 background, a 16×16 block of class 1 at (0, 0),
/// an 8×8 block of class 2 at (20, 20) and a 4×4 block of class 3 at (0, 24).
fn planted_map() -> Vec<u32> {
    let mut map = vec![0u32; 32 * 32];
    let mut fill = |x0: usize, y0: usize, w: usize, h: usize, class: u32| {
        for y in y0..y0 + h {
            for x in x0..x0 + w {
                map[y * 32 + x] = class;
            }
        }
    };
    fill(0, 0, 16, 16, 1);
    fill(20, 20, 8, 8, 2);
    fill(0, 24, 4, 4, 3);
    map
}

#[test]
fn identical_labels_agree_fully() {
    let a = planted_map();
    let summary = segment_agreement(&a, &a, 1, 4).unwrap();
    assert_eq!(summary.pixels, 1024);
    assert_eq!(summary.pixel_agreement_pct, 100.0);
    assert_eq!(summary.miou, Some(1.0));
    assert_eq!(summary.class_iou, vec![Some(1.0); 4]);
    assert!(summary.most_changed.is_empty());
}

#[test]
fn planted_class_swap_gives_hand_computed_iou() {
    let a = planted_map();
    let mut b = a.clone();
    // Relabel an 8×4 block inside A's class-1 square as class 2 in the reference B.
    for y in 4..8 {
        for x in 2..10 {
            b[y * 32 + x] = 2;
        }
    }
    let s = segment_agreement(&a, &b, 1, 4).unwrap();
    // 32 of 1024 pixels differ: agreement = 992 / 1024 = 96.875 %.
    assert_eq!(s.pixel_agreement_pct, 96.875);
    // class 0: untouched, 1024 - 256 - 64 - 16 = 688 pixels on both sides -> IoU 1.
    // class 1: B has 256 - 32 = 224, A has 256; TP 224, FP 32, FN 0 -> 224 / 256 = 0.875.
    // class 2: B has 64 + 32 = 96, A has 64; TP 64, FP 0, FN 32 -> 64 / 96 = 2/3.
    // class 3: untouched 16 pixels -> IoU 1.
    // mIoU = (1 + 0.875 + 2/3 + 1) / 4 = (24 + 21 + 16 + 24) / 96 = 85/96.
    assert_eq!(s.class_iou[0], Some(1.0));
    assert_eq!(s.class_iou[1], Some(0.875));
    assert!((s.class_iou[2].unwrap() - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(s.class_iou[3], Some(1.0));
    assert!((s.miou.unwrap() - 85.0 / 96.0).abs() < 1e-12);
    // Classes 1 and 2 each changed 32 pixels; ties list the lower class first.
    let changed: Vec<(usize, u64, u64, u64)> = s
        .most_changed
        .iter()
        .map(|c| (c.class, c.pixels_reference, c.pixels_under_test, c.changed))
        .collect();
    assert_eq!(changed, vec![(1, 224, 256, 32), (2, 96, 64, 32)]);
}

#[test]
fn most_changed_keeps_five_largest() {
    // Reference is class k + 1 for 10 * (k + 1) pixels where the output says class 0.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for k in 0..7u32 {
        for _ in 0..10 * (k + 1) {
            a.push(0);
            b.push(k + 1);
        }
    }
    let s = segment_agreement(&a, &b, 2, 8).unwrap();
    let classes: Vec<usize> = s.most_changed.iter().map(|c| c.class).collect();
    // Class 0 gained every pixel (280 changed), then classes 7, 6, 5, 4.
    assert_eq!(classes, vec![0, 7, 6, 5, 4]);
    assert_eq!(s.pixel_agreement_pct, 0.0);
    assert_eq!(s.class_iou[0], Some(0.0));
}

#[test]
fn argmax_over_depth_height_width() {
    // [N=2, C=3, D=2, H=2, W=2]: sample n, voxel v gets class (n + v) % 3 a value of 5.
    let shape = [2, 3, 2, 2, 2];
    let mut logits = vec![0.0f32; 2 * 3 * 8];
    for n in 0..2 {
        for v in 0..8 {
            let class = (n + v) % 3;
            logits[n * 24 + class * 8 + v] = 5.0;
        }
    }
    let labels = argmax_labels(&logits, &shape).unwrap();
    let expected: Vec<u32> = (0..2)
        .flat_map(|n| (0..8).map(move |v| ((n + v) % 3) as u32))
        .collect();
    assert_eq!(labels, expected);
}

#[test]
fn argmax_ties_go_low_and_nan_loses() {
    // [1, 3, 4]: pixel 0 ties classes 1 and 2, pixel 1 has NaN first,
    // pixel 2 has NaN as the largest class, pixel 3 is all NaN.
    let nan = f32::NAN;
    let logits = [
        0.0, nan, 1.0, nan, // class 0
        2.0, 1.0, 0.5, nan, // class 1
        2.0, 0.5, nan, nan, // class 2
    ];
    let labels = argmax_labels(&logits, &[1, 3, 4]).unwrap();
    assert_eq!(labels, vec![1, 1, 0, 0]);
}

#[test]
fn argmax_large_input_matches_naive() {
    // Over one parallel block per sample, with a pseudo-random pattern.
    let (n, c, s) = (2usize, 5usize, 20_000usize);
    let logits: Vec<f32> = (0..n * c * s).map(|i| ((i * 7919) % 1013) as f32).collect();
    let labels = argmax_labels(&logits, &[n, c, 100, 200]).unwrap();
    for (i, &label) in labels.iter().enumerate() {
        let (ni, si) = (i / s, i % s);
        let values: Vec<f32> = (0..c).map(|k| logits[ni * c * s + k * s + si]).collect();
        let max = values.iter().cloned().fold(f32::MIN, f32::max);
        let want = values.iter().position(|&v| v == max).unwrap() as u32;
        assert_eq!(label, want, "pixel {i}");
    }
}

#[test]
fn argmax_rejects_bad_shapes() {
    let err = argmax_labels(&[0.0; 6], &[2, 3]).unwrap_err().to_string();
    assert!(err.contains("rank 2"), "{err}");
    let err = argmax_labels(&[0.0; 5], &[1, 3, 2])
        .unwrap_err()
        .to_string();
    assert!(err.contains("need 6 values, got 5"), "{err}");
    let err = argmax_labels(&[], &[1, 0, 2]).unwrap_err().to_string();
    assert!(err.contains("no classes"), "{err}");
    let err = argmax_labels(&[], &[usize::MAX, 3, 2])
        .unwrap_err()
        .to_string();
    assert!(err.contains("overflows"), "{err}");
}

#[test]
fn ignored_reference_pixels_are_skipped() {
    let reference = [0, 255, 1, 255, 2, 1];
    let under_test = [0, 2, 1, 1, 1, 1];
    let mut c = Confusion::new(3);
    c.add(&reference, &under_test, Some(255)).unwrap();
    assert_eq!(c.ignored, 2);
    assert_eq!(c.pixels(), 4);
    // Counted pairs: (0,0), (1,1), (2,1), (1,1) -> 3 of 4 agree.
    assert_eq!(c.agreement(), 0.75);
    assert_eq!(c.counts, vec![1, 0, 0, 0, 2, 0, 0, 1, 0]);
    // class 1: TP 2, FP 1 -> 2/3; class 2: FN 1 -> 0.
    let iou = c.class_iou();
    assert_eq!(iou[0], Some(1.0));
    assert!((iou[1].unwrap() - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(iou[2], Some(0.0));
    let acc = SegmentAccuracy::from_confusion(&c, 1);
    assert_eq!((acc.pixels, acc.ignored, acc.pixel_accuracy), (4, 2, 0.75));
}

#[test]
fn out_of_range_label_is_named() {
    let mut c = Confusion::new(4);
    let err = c.add(&[0, 1, 2, 3], &[0, 1, 7, 3], None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "label 7 at pixel 2 (under test) is out of range for 4 classes"
    );
    let err = c.add(&[0, 9], &[0, 1], Some(255)).unwrap_err().to_string();
    assert!(
        err.contains("label 9") && err.contains("reference"),
        "{err}"
    );
    assert_eq!(c.pixels(), 0, "a failed add leaves the matrix untouched");
    let err = c.add(&[0, 1], &[0], None).unwrap_err().to_string();
    assert!(err.contains("differ in size"), "{err}");
}

#[test]
fn parallel_add_matches_sequential_count() {
    // 64 samples of 64×64, more than one block, with ignored pixels sprinkled in.
    let len = 64 * 64 * 64;
    let reference: Vec<u32> = (0..len)
        .map(|i| if i % 97 == 0 { 255 } else { (i % 5) as u32 })
        .collect();
    let under_test: Vec<u32> = (0..len).map(|i| ((i / 3) % 5) as u32).collect();
    let mut c = Confusion::new(5);
    c.add(&reference, &under_test, Some(255)).unwrap();
    let mut want = vec![0u64; 25];
    let mut ignored = 0;
    for (&r, &u) in reference.iter().zip(&under_test) {
        if r == 255 {
            ignored += 1;
        } else {
            want[r as usize * 5 + u as usize] += 1;
        }
    }
    assert_eq!(c.counts, want);
    assert_eq!(c.ignored, ignored);
}

#[test]
fn merge_adds_and_widens() {
    let mut small = Confusion::new(2);
    small.add(&[0, 1, 1], &[0, 1, 0], Some(9)).unwrap();
    let mut big = Confusion::new(3);
    big.add(&[2, 9], &[2, 2], Some(9)).unwrap();
    small.merge(&big);
    assert_eq!(small.classes, 3);
    assert_eq!(small.counts, vec![1, 0, 0, 1, 1, 0, 0, 0, 1]);
    assert_eq!(small.ignored, 1);
    assert_eq!(small.pixels(), 4);
}

#[test]
fn empty_matrix_has_no_iou() {
    let c = Confusion::new(3);
    assert_eq!(c.agreement(), 0.0);
    assert_eq!(c.mean_iou(), None);
    assert_eq!(c.class_iou(), vec![None; 3]);
    let err = segment_agreement(&[0, 1, 2], &[0, 1, 2], 2, 3).unwrap_err();
    assert!(err.to_string().contains("2 equal samples"), "{err}");
    assert!(segment_agreement(&[0], &[0], 0, 3).is_err());
    let empty = segment_agreement(&[], &[], 0, 3).unwrap();
    assert_eq!((empty.pixels, empty.miou), (0, None));
}
