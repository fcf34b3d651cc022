//! Decoding raw YOLO detection heads into boxes: pick each anchor's best class, keep the
//! anchors whose score reaches the confidence threshold, then apply class-aware
//! non-maximum suppression. Images are decoded in parallel.

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Error, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::boxes::{BoxFormat, Detection};
use super::nms;

/// How the values of a YOLO head are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeadLayout {
    /// `[N, anchors, 5 + classes]`: box, objectness, class scores (YOLOv5-style); score = objectness × class score.
    AnchorsFirst,
    /// `[N, 4 + classes, anchors]`: box, class scores, no objectness (YOLOv8-style).
    AnchorsLast,
}

impl HeadLayout {
    /// Guesses the layout from a head's shape, or `None` when the shape fits neither.
    ///
    /// Heads have far more anchors than values per anchor, so `[N, A, K]` with `A > K` and
    /// `K >= 6` reads as anchors first and `[N, K, A]` with `A > K` and `K >= 5` as anchors
    /// last. A YOLOv8 head transposed to `[N, anchors, 4 + classes]` looks anchors-first to
    /// this rule; name the layout explicitly for such models.
    pub(crate) fn guess(shape: &[usize]) -> Option<HeadLayout> {
        match *shape {
            [_, a, k] if a > k && k >= 6 => Some(HeadLayout::AnchorsFirst),
            [_, k, a] if a > k && k >= 5 => Some(HeadLayout::AnchorsLast),
            _ => None,
        }
    }
}

impl FromStr for HeadLayout {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "anchors-first" => Ok(HeadLayout::AnchorsFirst),
            "anchors-last" => Ok(HeadLayout::AnchorsLast),
            _ => bail!("unknown head layout '{s}': expected 'anchors-first' or 'anchors-last'"),
        }
    }
}

impl fmt::Display for HeadLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HeadLayout::AnchorsFirst => "anchors-first",
            HeadLayout::AnchorsLast => "anchors-last",
        })
    }
}

/// Settings for turning a raw head into detections.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct DecodeOptions {
    /// How the head's values are laid out.
    pub layout: HeadLayout,
    /// How each anchor's four box numbers are written.
    pub boxes: BoxFormat,
    /// Confidence threshold: anchors scoring below it are dropped.
    pub conf: f32,
    /// IoU threshold of non-maximum suppression, between 0 and 1.
    pub iou: f32,
    /// Most detections kept per image, best score first.
    pub(crate) max_detections: usize,
}

impl DecodeOptions {
    #[cfg(test)]
    /// Options with the usual YOLO defaults for a layout: centre-size boxes, confidence
    /// 0.25, IoU 0.45 and at most 300 detections per image.
    pub fn new(layout: HeadLayout) -> DecodeOptions {
        DecodeOptions {
            layout,
            boxes: BoxFormat::Cxcywh,
            conf: 0.25,
            iou: 0.45,
            max_detections: 300,
        }
    }
}

/// Anchors and values per anchor of a checked head.
struct Dims {
    anchors: usize,
    channels: usize,
}

/// Decodes a raw YOLO head of the given shape into one list of detections per image.
///
/// Each anchor takes its best class (the first one on ties); its score is that class score,
/// times objectness for anchors-first heads. Anchors scoring below `conf`, or with a score
/// or box that is not finite, are dropped. Scores are expected to be probabilities (after
/// the sigmoid): anchors-first heads skip anchors whose objectness alone is below `conf`.
/// The rest go through class-aware NMS and the best `max_detections` are kept.
pub(crate) fn decode_head(
    data: &[f32],
    shape: &[usize],
    opts: &DecodeOptions,
) -> Result<Vec<Vec<Detection>>> {
    let dims = check_shape(data.len(), shape, opts.layout)?;
    check_options(opts)?;
    let per_image = dims.anchors * dims.channels;
    Ok(data
        .par_chunks_exact(per_image)
        .map(|image| {
            let candidates = match opts.layout {
                HeadLayout::AnchorsFirst => anchors_first(image, dims.channels, opts),
                HeadLayout::AnchorsLast => anchors_last(image, dims.anchors, opts),
            };
            nms::class_aware(candidates, opts.iou, opts.max_detections)
        })
        .collect())
}

/// Checks a head's shape against its data and layout.
fn check_shape(len: usize, shape: &[usize], layout: HeadLayout) -> Result<Dims> {
    let &[images, second, third] = shape else {
        bail!(
            "head has shape {shape:?}: a YOLO head is [N, anchors, 5+classes] \
             or [N, 4+classes, anchors]"
        );
    };
    let Some(need) = images
        .checked_mul(second)
        .and_then(|v| v.checked_mul(third))
    else {
        bail!("head shape {shape:?} is too large to address");
    };
    if need != len {
        bail!("head data has {len} values but its shape {shape:?} needs {need}");
    }
    let anchors = match layout {
        HeadLayout::AnchorsFirst => second,
        HeadLayout::AnchorsLast => third,
    };
    if anchors == 0 {
        bail!("head has shape {shape:?}: it holds no anchors");
    }
    match layout {
        HeadLayout::AnchorsFirst if third < 6 => bail!(
            "head has shape {shape:?}: an anchors-first head is [N, anchors, 5+classes], \
             so its last dimension must be at least 6"
        ),
        HeadLayout::AnchorsLast if second < 5 => bail!(
            "head has shape {shape:?}: an anchors-last head is [N, 4+classes, anchors], \
             so its second dimension must be at least 5"
        ),
        HeadLayout::AnchorsFirst => Ok(Dims {
            anchors: second,
            channels: third,
        }),
        HeadLayout::AnchorsLast => Ok(Dims {
            anchors: third,
            channels: second,
        }),
    }
}

/// Checks the thresholds of the decode options.
fn check_options(opts: &DecodeOptions) -> Result<()> {
    if opts.conf.is_nan() {
        bail!("the confidence threshold is NaN");
    }
    if !(0.0..=1.0).contains(&opts.iou) {
        bail!("the IoU threshold {} is outside [0, 1]", opts.iou);
    }
    Ok(())
}

/// The largest class score, NaNs passed over; -inf when nothing is larger.
fn max_score(scores: &[f32]) -> f32 {
    // Eight running maxima, one per lane, let the compiler use vector instructions.
    const LANES: usize = 8;
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let (chunks, tail) = scores.as_chunks::<LANES>();
    for chunk in chunks {
        for l in 0..LANES {
            lanes[l] = if chunk[l] > lanes[l] {
                chunk[l]
            } else {
                lanes[l]
            };
        }
    }
    let mut max = f32::NEG_INFINITY;
    for &v in lanes.iter().chain(tail) {
        if v > max {
            max = v;
        }
    }
    max
}

/// Candidates of one anchors-first image, laid out `[anchors, channels]`.
fn anchors_first(image: &[f32], channels: usize, opts: &DecodeOptions) -> Vec<Detection> {
    let mut out = Vec::new();
    for row in image.chunks_exact(channels) {
        let objectness = row[4];
        // Objectness times a class score in [0, 1] cannot exceed the objectness.
        if objectness.is_nan() || objectness < opts.conf {
            continue;
        }
        let classes = &row[5..];
        let best = max_score(classes);
        let score = objectness * best;
        if !(score >= opts.conf && score.is_finite()) {
            continue;
        }
        let bbox = opts.boxes.to_xyxy([row[0], row[1], row[2], row[3]]);
        if bbox.iter().all(|v| v.is_finite()) {
            // The first class holding the best score (always found: the score is finite).
            let class = classes.iter().position(|&v| v == best).unwrap_or(0);
            out.push(Detection { bbox, score, class });
        }
    }
    out
}

/// Candidates of one anchors-last image, laid out `[channels, anchors]`: the class rows are
/// scanned one after the other, keeping a running best per anchor.
fn anchors_last(image: &[f32], anchors: usize, opts: &DecodeOptions) -> Vec<Detection> {
    let mut best = vec![f32::NEG_INFINITY; anchors];
    let mut best_class = vec![0usize; anchors];
    for (class, row) in image.chunks_exact(anchors).skip(4).enumerate() {
        for ((b, c), &v) in best.iter_mut().zip(best_class.iter_mut()).zip(row) {
            if v > *b {
                *b = v;
                *c = class;
            }
        }
    }
    let (cx, rest) = image.split_at(anchors);
    let (cy, rest) = rest.split_at(anchors);
    let (w, rest) = rest.split_at(anchors);
    let h = &rest[..anchors];
    let mut out = Vec::new();
    for (a, (&score, &class)) in best.iter().zip(&best_class).enumerate() {
        if score >= opts.conf && score.is_finite() {
            let bbox = opts.boxes.to_xyxy([cx[a], cy[a], w[a], h[a]]);
            if bbox.iter().all(|v| v.is_finite()) {
                out.push(Detection { bbox, score, class });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per image, per anchor: box (4 numbers) and class scores.
    type Anchor = ([f32; 4], Vec<f32>);

    /// Lays anchors out as an anchors-first head, with the given objectness everywhere.
    fn first_layout(images: &[Vec<Anchor>], objectness: f32) -> (Vec<f32>, Vec<usize>) {
        let (a, k) = (images[0].len(), 5 + images[0][0].1.len());
        let mut data = Vec::new();
        for image in images {
            for (bbox, scores) in image {
                data.extend_from_slice(bbox);
                data.push(objectness);
                data.extend_from_slice(scores);
            }
        }
        (data, vec![images.len(), a, k])
    }

    /// Lays anchors out as an anchors-last head.
    fn last_layout(images: &[Vec<Anchor>]) -> (Vec<f32>, Vec<usize>) {
        let (a, k) = (images[0].len(), 4 + images[0][0].1.len());
        let mut data = Vec::new();
        for image in images {
            for c in 0..k {
                for (bbox, scores) in image {
                    data.push(if c < 4 { bbox[c] } else { scores[c - 4] });
                }
            }
        }
        (data, vec![images.len(), k, a])
    }

    /// Two images of eight anchors and three classes, with overlapping boxes, ties and
    /// low scores.
    fn sample() -> Vec<Vec<Anchor>> {
        let image0 = vec![
            ([50.0, 50.0, 20.0, 20.0], vec![0.9, 0.1, 0.0]),
            // Overlaps the first box (IoU 0.90), same class: suppressed.
            ([51.0, 50.0, 20.0, 20.0], vec![0.8, 0.2, 0.1]),
            // Same place, other class: kept.
            ([50.0, 50.0, 20.0, 20.0], vec![0.1, 0.7, 0.0]),
            // Tie between classes 1 and 2: class 1 wins.
            ([150.0, 40.0, 30.0, 10.0], vec![0.0, 0.6, 0.6]),
            // Below the threshold.
            ([10.0, 10.0, 4.0, 4.0], vec![0.2, 0.1, 0.1]),
            ([300.0, 300.0, 40.0, 40.0], vec![0.05, 0.05, 0.55]),
            ([0.0, 0.0, 8.0, 8.0], vec![0.3, 0.31, 0.0]),
            // Not finite: dropped.
            ([f32::NAN, 0.0, 8.0, 8.0], vec![0.9, 0.0, 0.0]),
        ];
        let mut image1 = image0.clone();
        image1.reverse();
        // A NaN class score is passed over; the anchor keeps its best other class.
        image1[0] = ([200.0, 200.0, 10.0, 10.0], vec![f32::NAN, 0.95, 0.0]);
        vec![image0, image1]
    }

    fn opts(layout: HeadLayout) -> DecodeOptions {
        DecodeOptions::new(layout)
    }

    #[test]
    fn both_layouts_decode_to_the_same_boxes() {
        let images = sample();
        let (first, first_shape) = first_layout(&images, 1.0);
        let (last, last_shape) = last_layout(&images);
        let a = decode_head(&first, &first_shape, &opts(HeadLayout::AnchorsFirst)).unwrap();
        let b = decode_head(&last, &last_shape, &opts(HeadLayout::AnchorsLast)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 2);
        let got: Vec<(usize, f32)> = a[0].iter().map(|d| (d.class, d.score)).collect();
        assert_eq!(
            got,
            vec![(0, 0.9), (1, 0.7), (1, 0.6), (2, 0.55), (1, 0.31)]
        );
        assert_eq!(a[0][0].bbox, [40.0, 40.0, 60.0, 60.0]);
        assert_eq!(a[0][2].bbox, [135.0, 35.0, 165.0, 45.0]);
        // The second image holds the same anchors in reverse, plus one with a NaN score.
        assert_eq!(a[1].len(), 6);
        assert_eq!((a[1][0].class, a[1][0].score), (1, 0.95));
        assert_eq!(&a[1][1..], &a[0][..]);
    }

    #[test]
    fn objectness_multiplies_class_scores() {
        let images = sample();
        let (data, shape) = first_layout(&images, 0.5);
        let dets = decode_head(&data, &shape, &opts(HeadLayout::AnchorsFirst)).unwrap();
        let got: Vec<(usize, f32)> = dets[0].iter().map(|d| (d.class, d.score)).collect();
        // 0.9 × 0.5, 0.7 × 0.5, 0.6 × 0.5, 0.55 × 0.5; 0.31 × 0.5 is under 0.25.
        assert_eq!(got, vec![(0, 0.45), (1, 0.35), (1, 0.3), (2, 0.275)]);
        // Objectness under the threshold drops every anchor.
        let (data, shape) = first_layout(&images, 0.2);
        let dets = decode_head(&data, &shape, &opts(HeadLayout::AnchorsFirst)).unwrap();
        assert!(dets.iter().all(Vec::is_empty));
    }

    #[test]
    fn corner_boxes_are_taken_as_they_are() {
        let images = vec![vec![
            ([10.0, 20.0, 30.0, 60.0], vec![0.9]),
            ([0.0, 0.0, 1.0, 1.0], vec![0.0]),
        ]];
        let (data, shape) = last_layout(&images);
        let mut o = opts(HeadLayout::AnchorsLast);
        o.boxes = BoxFormat::Xyxy;
        let dets = decode_head(&data, &shape, &o).unwrap();
        assert_eq!(dets[0][0].bbox, [10.0, 20.0, 30.0, 60.0]);
        o.boxes = BoxFormat::Cxcywh;
        let dets = decode_head(&data, &shape, &o).unwrap();
        assert_eq!(dets[0][0].bbox, [-5.0, -10.0, 25.0, 50.0]);
    }

    #[test]
    fn confidence_threshold_and_max_detections() {
        let images = sample();
        let (data, shape) = last_layout(&images);
        let mut o = opts(HeadLayout::AnchorsLast);
        o.conf = 0.6;
        let dets = decode_head(&data, &shape, &o).unwrap();
        // A score equal to the threshold is kept.
        let scores: Vec<f32> = dets[0].iter().map(|d| d.score).collect();
        assert_eq!(scores, vec![0.9, 0.7, 0.6]);
        o.conf = 0.0;
        o.max_detections = 2;
        let dets = decode_head(&data, &shape, &o).unwrap();
        assert_eq!(dets[0].len(), 2);
        o.max_detections = 100;
        let dets = decode_head(&data, &shape, &o).unwrap();
        assert_eq!(dets[0].len(), 6);
    }

    #[test]
    fn many_classes_pick_the_first_best_and_skip_nan() {
        // 21 classes (more than one block of eight): NaN first, the best score 0.8 at
        // classes 11 and 19; the first one wins in both layouts.
        let mut scores = vec![0.1f32; 21];
        scores[0] = f32::NAN;
        scores[11] = 0.8;
        scores[19] = 0.8;
        scores[20] = 0.79;
        let images = vec![vec![
            ([10.0, 10.0, 4.0, 4.0], scores.clone()),
            ([50.0, 50.0, 4.0, 4.0], vec![0.0; 21]),
        ]];
        let (data, shape) = first_layout(&images, 1.0);
        let a = decode_head(&data, &shape, &opts(HeadLayout::AnchorsFirst)).unwrap();
        let (data, shape) = last_layout(&images);
        let b = decode_head(&data, &shape, &opts(HeadLayout::AnchorsLast)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a[0].len(), 1);
        assert_eq!((a[0][0].class, a[0][0].score), (11, 0.8));
        // The best class sitting in the tail after the last block of eight.
        scores[20] = 0.9;
        let (data, shape) = first_layout(&[vec![([0.0, 0.0, 1.0, 1.0], scores)]], 1.0);
        let a = decode_head(&data, &shape, &opts(HeadLayout::AnchorsFirst)).unwrap();
        assert_eq!((a[0][0].class, a[0][0].score), (20, 0.9));
    }

    #[test]
    fn guesses_layouts_from_shapes() {
        assert_eq!(
            HeadLayout::guess(&[1, 25200, 85]),
            Some(HeadLayout::AnchorsFirst)
        );
        assert_eq!(
            HeadLayout::guess(&[64, 84, 8400]),
            Some(HeadLayout::AnchorsLast)
        );
        assert_eq!(HeadLayout::guess(&[1, 100, 5]), None);
        assert_eq!(HeadLayout::guess(&[2, 8, 8]), None);
        assert_eq!(HeadLayout::guess(&[1, 4, 100]), None);
        assert_eq!(HeadLayout::guess(&[1000, 85]), None);
        assert_eq!(HeadLayout::guess(&[1, 1, 85, 25200]), None);
        for l in [HeadLayout::AnchorsFirst, HeadLayout::AnchorsLast] {
            assert_eq!(l.to_string().parse::<HeadLayout>().unwrap(), l);
            let json = serde_json::to_string(&l).unwrap();
            assert_eq!(json, format!("\"{l}\""));
        }
        assert!("v5".parse::<HeadLayout>().is_err());
    }

    #[test]
    fn bad_shapes_and_options_are_errors() {
        let first = opts(HeadLayout::AnchorsFirst);
        let last = opts(HeadLayout::AnchorsLast);
        let err = |r: Result<Vec<Vec<Detection>>>| r.unwrap_err().to_string();
        let e = err(decode_head(&[0.0; 14], &[2, 7], &first));
        assert!(
            e.contains("[2, 7]") && e.contains("[N, anchors, 5+classes]"),
            "{e}"
        );
        let e = err(decode_head(&[0.0; 50], &[1, 10, 5], &first));
        assert!(e.contains("at least 6"), "{e}");
        let e = err(decode_head(&[0.0; 40], &[1, 4, 10], &last));
        assert!(e.contains("at least 5"), "{e}");
        let e = err(decode_head(&[0.0; 10], &[1, 10, 6], &first));
        assert!(e.contains("has 10 values") && e.contains("needs 60"), "{e}");
        let e = err(decode_head(&[], &[usize::MAX, 2, 6], &first));
        assert!(e.contains("too large"), "{e}");
        let mut o = first;
        o.iou = 1.5;
        assert!(err(decode_head(&[0.0; 60], &[1, 10, 6], &o)).contains("IoU threshold 1.5"));
        o = first;
        o.conf = f32::NAN;
        assert!(err(decode_head(&[0.0; 60], &[1, 10, 6], &o)).contains("NaN"));
        let e = err(decode_head(&[], &[3, 0, 6], &first));
        assert!(e.contains("no anchors"), "{e}");
        // No images is not an error.
        assert!(decode_head(&[], &[0, 10, 6], &first).unwrap().is_empty());
    }
}
