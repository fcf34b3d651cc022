//! A detector's outputs as boxes per image: a raw YOLO head (decoded, then class-aware NMS
//! inside trtkit), or the boxes/scores/labels of a model that runs NMS itself.

use super::boxes::{BoxFormat, Detection};
use super::decode::{decode_head, DecodeOptions, HeadLayout};
use crate::tensor::HostTensor;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// How raw heads are decoded and filtered.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetectOptions {
    /// Boxes scoring below this are dropped (before NMS for raw heads).
    pub conf: f32,
    /// NMS IoU threshold for raw heads.
    pub iou: f32,
    /// How box coordinates are laid out; `None`: centre-size for raw heads, corners for NMS
    /// outputs.
    pub boxes: Option<BoxFormat>,
    /// The head's layout; `None`: guessed from its shape.
    pub layout: Option<HeadLayout>,
    /// At most this many boxes per image, best first.
    pub(crate) max_detections: usize,
    /// In a comparison, a box scoring down to `conf` minus this on one side still pairs with
    /// the other side's box: a score that only crossed `conf` is a shift, not a lost box.
    pub(crate) score_tolerance: f32,
}

impl DetectOptions {
    /// The settings `compare` uses by default: boxes a user would draw (confidence 0.25,
    /// NMS at IoU 0.45, at most 300 per image), paired across a score tolerance of 0.01.
    pub fn agreement() -> Self {
        DetectOptions {
            conf: 0.25,
            iou: 0.45,
            boxes: None,
            layout: None,
            max_detections: 300,
            score_tolerance: 0.01,
        }
    }

    /// The settings `validate` uses by default: the COCO evaluation's (confidence 0.001, NMS
    /// at IoU 0.6, at most 100 per image).
    pub fn evaluation() -> Self {
        DetectOptions {
            conf: 0.001,
            iou: 0.6,
            boxes: None,
            layout: None,
            max_detections: 100,
            score_tolerance: 0.0,
        }
    }
}

/// Boxes per image, and in words where they came from.
#[derive(Clone, Debug)]
pub struct DecodedBoxes {
    /// One list per image.
    pub images: Vec<Vec<Detection>>,
    /// E.g. "raw head 'output0' [64, 6300, 85], anchors first with objectness, cxcywh".
    pub source: String,
}

/// The outputs of a model that runs NMS itself, found by name: boxes `[N, K, 4]` (or `[K, 4]`
/// for one image), scores and labels `[N, K]` (or `[K]`), and optionally the count per image
/// (`num…`, `[N]` or `[N, 1]`).
pub(crate) struct NmsOutputs<'a> {
    boxes: &'a HostTensor,
    scores: &'a HostTensor,
    labels: &'a HostTensor,
    count: Option<&'a HostTensor>,
}

impl<'a> NmsOutputs<'a> {
    /// Finds the three (or four) outputs by their names, `None` when they are not all there.
    pub fn find(outputs: &'a [HostTensor]) -> Option<Self> {
        let named = |keys: &[&str]| {
            outputs.iter().find(|t| {
                let name = t.name.to_ascii_lowercase();
                keys.iter().any(|k| name.contains(k))
            })
        };
        let boxes = named(&["box"])?;
        (boxes.shape.last() == Some(&4)).then_some(())?;
        Some(NmsOutputs {
            boxes,
            scores: named(&["score", "conf"])?,
            labels: named(&["label", "class"])?,
            count: named(&["num", "count"]),
        })
    }

    /// The boxes per image, corners unless `format` says otherwise; rows past the count, with
    /// a negative label or a score below `conf` are left out.
    pub fn decode(&self, format: BoxFormat, conf: f32) -> Result<DecodedBoxes> {
        let (images, per_image) = match self.boxes.shape.as_slice() {
            [n, k, 4] => (*n, *k),
            [k, 4] => (1, *k),
            other => bail!(
                "output '{}' has shape {other:?}: NMS boxes are [N, K, 4] or [K, 4]",
                self.boxes.name
            ),
        };
        for t in [self.scores, self.labels] {
            if t.data.len() != images * per_image {
                bail!(
                    "output '{}' has shape {:?}; with boxes {:?} it needs {} values",
                    t.name,
                    t.shape,
                    self.boxes.shape,
                    images * per_image
                );
            }
        }
        let counts = match self.count {
            Some(c) if c.data.len() == images => c.data.to_f64(),
            Some(c) => bail!(
                "output '{}' has shape {:?}: a count per image needs {images} values",
                c.name,
                c.shape
            ),
            None => vec![per_image as f64; images],
        };
        let (boxes, scores, labels) = (
            self.boxes.data.as_f32(),
            self.scores.data.as_f32(),
            self.labels.data.to_f64(),
        );
        let decoded = (0..images)
            .map(|i| {
                let kept = (counts[i].max(0.0) as usize).min(per_image);
                (i * per_image..i * per_image + kept)
                    .filter(|&r| labels[r] >= 0.0 && scores[r] >= conf)
                    .map(|r| Detection {
                        bbox: format.to_xyxy(boxes[r * 4..r * 4 + 4].try_into().expect("4")),
                        score: scores[r],
                        class: labels[r] as usize,
                    })
                    .collect()
            })
            .collect();
        Ok(DecodedBoxes {
            images: decoded,
            source: format!(
                "NMS outputs '{}' {:?}, '{}', '{}'{}, {format} boxes",
                self.boxes.name,
                self.boxes.shape,
                self.scores.name,
                self.labels.name,
                self.count
                    .map(|c| format!(", count '{}'", c.name))
                    .unwrap_or_default()
            ),
        })
    }
}

/// The first rank-3 float output whose shape reads as a raw YOLO head, with its layout.
pub(crate) fn find_head(outputs: &[HostTensor]) -> Option<(&HostTensor, HeadLayout)> {
    outputs
        .iter()
        .filter(|t| t.elem_type().is_float())
        .find_map(|t| HeadLayout::guess(&t.shape).map(|l| (t, l)))
}

/// The boxes in a detector's outputs: NMS outputs when the model has them, else its raw head,
/// decoded and put through class-aware NMS.
pub fn detections(outputs: &[HostTensor], options: &DetectOptions) -> Result<DecodedBoxes> {
    if let Some(nms) = NmsOutputs::find(outputs) {
        return nms.decode(options.boxes.unwrap_or(BoxFormat::Xyxy), options.conf);
    }
    let (head, layout) = match options.layout {
        Some(layout) => {
            let head = outputs
                .iter()
                .find(|t| t.shape.len() == 3 && t.elem_type().is_float())
                .context("no float [N, anchors, channels] output to decode as a YOLO head")?;
            (head, layout)
        }
        None => find_head(outputs).with_context(|| {
            let shapes: Vec<String> = outputs
                .iter()
                .map(|t| format!("'{}' {:?}", t.name, t.shape))
                .collect();
            format!(
                "no output reads as detections (a YOLO head [N, anchors, 5+classes] or \
                 [N, 4+classes, anchors], or boxes/scores/labels outputs); outputs: {}",
                shapes.join(", ")
            )
        })?,
    };
    let boxes = options.boxes.unwrap_or(BoxFormat::Cxcywh);
    let decode = DecodeOptions {
        layout,
        boxes,
        conf: options.conf,
        iou: options.iou,
        max_detections: options.max_detections,
    };
    let images = decode_head(&head.data.as_f32(), &head.shape, &decode)
        .with_context(|| format!("output '{}'", head.name))?;
    let layout_words = match layout {
        HeadLayout::AnchorsFirst => "anchors first, with objectness",
        HeadLayout::AnchorsLast => "anchors last, no objectness",
    };
    Ok(DecodedBoxes {
        images,
        source: format!(
            "raw head '{}' {:?}, {layout_words}, {boxes} boxes; NMS at IoU {} above confidence {}",
            head.name, head.shape, options.iou, options.conf
        ),
    })
}
