//! Boxes and detections: the record shared by decoding, suppression, matching and COCO
//! evaluation, the two box encodings YOLO heads use, and intersection over union.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Error, Result};
use serde::{Deserialize, Serialize};

/// One detected object: a box given by its corners, its confidence and its class.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    /// Box corners `[x1, y1, x2, y2]` in the model's input pixels.
    pub bbox: [f32; 4],
    /// Confidence: the class score, times objectness where the head has one.
    pub score: f32,
    /// Class index, counting from 0.
    pub class: usize,
}

/// How a head writes the four box numbers of an anchor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BoxFormat {
    /// Centre and size `[cx, cy, w, h]`, what YOLO heads emit.
    #[default]
    Cxcywh,
    /// Corners `[x1, y1, x2, y2]`, for heads exported with their boxes already converted.
    Xyxy,
}

impl BoxFormat {
    /// Converts four box numbers written in this format to corners `[x1, y1, x2, y2]`.
    pub(crate) fn to_xyxy(self, b: [f32; 4]) -> [f32; 4] {
        match self {
            BoxFormat::Xyxy => b,
            BoxFormat::Cxcywh => {
                let (half_w, half_h) = (b[2] * 0.5, b[3] * 0.5);
                [b[0] - half_w, b[1] - half_h, b[0] + half_w, b[1] + half_h]
            }
        }
    }
}

impl FromStr for BoxFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cxcywh" => Ok(BoxFormat::Cxcywh),
            "xyxy" => Ok(BoxFormat::Xyxy),
            _ => bail!("unknown box format '{s}': expected 'cxcywh' or 'xyxy'"),
        }
    }
}

impl fmt::Display for BoxFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BoxFormat::Cxcywh => "cxcywh",
            BoxFormat::Xyxy => "xyxy",
        })
    }
}

/// Area of a corner box; a box with `x2 <= x1` or `y2 <= y1` has area 0.
pub(crate) fn area(b: &[f32; 4]) -> f32 {
    (b[2] - b[0]).max(0.0) * (b[3] - b[1]).max(0.0)
}

/// Area of a corner box in double precision, as the COCO evaluation computes it
/// (width times height, 0 for an empty box).
pub(crate) fn area64(b: &[f32; 4]) -> f64 {
    let w = f64::from(b[2]) - f64::from(b[0]);
    let h = f64::from(b[3]) - f64::from(b[1]);
    if w > 0.0 && h > 0.0 {
        w * h
    } else {
        0.0
    }
}

/// Area shared by two corner boxes, in double precision; 0 when they do not overlap or a
/// coordinate is not finite.
pub(crate) fn intersection64(a: &[f32; 4], b: &[f32; 4]) -> f64 {
    if !a.iter().chain(b).all(|v| v.is_finite()) {
        return 0.0;
    }
    let w = f64::from(a[2].min(b[2])) - f64::from(a[0].max(b[0]));
    let h = f64::from(a[3].min(b[3])) - f64::from(a[1].max(b[1]));
    if w > 0.0 && h > 0.0 {
        w * h
    } else {
        0.0
    }
}

/// Intersection over union of two corner boxes in double precision, with no "+1" on widths
/// (as pycocotools); 0 when the boxes do not overlap or either is empty.
pub(crate) fn iou64(a: &[f32; 4], b: &[f32; 4]) -> f64 {
    let inter = intersection64(a, b);
    if inter <= 0.0 {
        return 0.0;
    }
    let union = area64(a) + area64(b) - inter;
    if union > 0.0 {
        inter / union
    } else {
        0.0
    }
}

/// Intersection over union of two corner boxes `[x1, y1, x2, y2]`, with no "+1" on widths
/// (as pycocotools); 0 when the boxes do not overlap or the union is empty.
pub fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    iou64(a, b) as f32
}

/// Orders detections best score first, for sorting; a NaN score counts as the lowest, and
/// equal scores compare equal so that stable sorts keep their input order.
pub(crate) fn by_score_desc(a: &Detection, b: &Detection) -> Ordering {
    let key = |d: &Detection| {
        if d.score.is_nan() {
            f32::NEG_INFINITY
        } else {
            // Adding 0.0 turns -0.0 into 0.0 so that the two compare equal.
            d.score + 0.0
        }
    };
    key(b).total_cmp(&key(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(score: f32) -> Detection {
        Detection {
            bbox: [0.0, 0.0, 1.0, 1.0],
            score,
            class: 0,
        }
    }

    #[test]
    fn iou_of_known_boxes() {
        let a = [0.0, 0.0, 10.0, 10.0];
        // Half overlap: 50 / (100 + 100 - 50).
        assert!((iou(&a, &[5.0, 0.0, 15.0, 10.0]) - 1.0 / 3.0).abs() < 1e-7);
        // One box inside the other: 25 / 100.
        assert!((iou(&a, &[0.0, 0.0, 5.0, 5.0]) - 0.25).abs() < 1e-7);
        assert_eq!(iou(&a, &a), 1.0);
        // Touching edges share no area.
        assert_eq!(iou(&a, &[10.0, 0.0, 20.0, 10.0]), 0.0);
        assert_eq!(iou(&a, &[30.0, 30.0, 40.0, 40.0]), 0.0);
    }

    #[test]
    fn iou_of_degenerate_or_broken_boxes_is_zero() {
        let empty = [3.0, 3.0, 3.0, 3.0];
        assert_eq!(iou(&empty, &empty), 0.0);
        let inverted = [10.0, 10.0, 0.0, 0.0];
        assert_eq!(iou(&inverted, &[0.0, 0.0, 10.0, 10.0]), 0.0);
        let nan = [f32::NAN, 0.0, 10.0, 10.0];
        assert_eq!(iou(&nan, &[0.0, 0.0, 10.0, 10.0]), 0.0);
        assert_eq!(area(&inverted), 0.0);
        assert_eq!(area(&[1.0, 2.0, 4.0, 6.0]), 12.0);
        assert_eq!(area64(&[1.0, 2.0, 4.0, 6.0]), 12.0);
    }

    #[test]
    fn converts_centre_size_to_corners() {
        assert_eq!(
            BoxFormat::Cxcywh.to_xyxy([10.0, 20.0, 4.0, 6.0]),
            [8.0, 17.0, 12.0, 23.0]
        );
        assert_eq!(
            BoxFormat::Xyxy.to_xyxy([1.0, 2.0, 3.0, 4.0]),
            [1.0, 2.0, 3.0, 4.0]
        );
        assert_eq!(BoxFormat::default(), BoxFormat::Cxcywh);
    }

    #[test]
    fn parses_and_prints_box_formats() {
        assert_eq!("xyxy".parse::<BoxFormat>().unwrap(), BoxFormat::Xyxy);
        assert_eq!(" CxCyWh ".parse::<BoxFormat>().unwrap(), BoxFormat::Cxcywh);
        let err = "xywh".parse::<BoxFormat>().unwrap_err().to_string();
        assert!(err.contains("'xywh'") && err.contains("cxcywh") && err.contains("xyxy"));
        for f in [BoxFormat::Cxcywh, BoxFormat::Xyxy] {
            assert_eq!(f.to_string().parse::<BoxFormat>().unwrap(), f);
        }
        assert_eq!(serde_json::to_string(&BoxFormat::Xyxy).unwrap(), "\"xyxy\"");
    }

    #[test]
    fn sorts_best_first_with_nan_last_and_stable_ties() {
        let mut v = [
            det(0.2),
            det(f32::NAN),
            det(0.9),
            det(0.5),
            det(-0.0),
            det(0.0),
        ];
        v[4].class = 4;
        v[5].class = 5;
        v.sort_by(by_score_desc);
        let scores: Vec<f32> = v.iter().map(|d| d.score).collect();
        assert_eq!(&scores[..3], &[0.9, 0.5, 0.2]);
        // -0.0 and 0.0 tie, so the stable sort keeps their order.
        assert_eq!((v[3].class, v[4].class), (4, 5));
        assert!(v[5].score.is_nan());
    }
}
