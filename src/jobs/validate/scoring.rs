//! How `validate` scores a batch of outputs against the ground truth: top-1/top-5 for a class
//! per image, mIoU and pixel accuracy against PNG masks, COCO mAP against annotated boxes.

use crate::data::coco::CocoAnnotations;
use crate::data::dataset::{Annotations, Dataset, Sample};
use crate::data::image_size::image_size;
use crate::data::masks::{mask_size, read_mask};
use crate::data::preprocess::Preprocess;
use crate::data::walk::{walk, Failure};
use crate::metrics::accuracy::{top_k, TopKAccuracy};
use crate::metrics::detection::boxes::Detection;
use crate::metrics::detection::coco::{evaluate, GroundTruth, MeanAp};
use crate::metrics::detection::outputs::{detections, DetectOptions};
use crate::metrics::segmentation::{Confusion, SegmentAccuracy};
use crate::metrics::task::pixel_classes;
use crate::tensor::HostTensor;
use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Mask pixels of this value are left out (PASCAL VOC's object borders).
pub(crate) const MASK_IGNORE: u32 = 255;

/// COCO's evaluation keeps at most this many detections per image.
pub(crate) const COCO_MAX_DETECTIONS: usize = 100;

/// Detection accuracy on COCO-format annotations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DetectAccuracy {
    /// Images scored.
    pub images: usize,
    /// Ground-truth boxes (crowd regions left out).
    pub ground_truths: usize,
    /// Detections kept (after NMS, at most 100 per image).
    pub detections: usize,
    /// The confidence below which detections were dropped.
    pub conf: f32,
    /// The NMS IoU threshold.
    pub iou: f32,
    /// mAP@0.5, mAP@0.75, mAP@0.5:0.95 and each class's AP, as COCO's evaluation defines them.
    #[serde(flatten)]
    pub map: MeanAp,
}

/// One image's prediction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The image file.
    pub file: PathBuf,
    /// Its label.
    pub label: usize,
    /// The top-5 classes, best first.
    pub top5: Vec<usize>,
}

/// What a scorer found, by task.
pub(crate) enum Scored {
    /// Top-k hits, and every image's top-5 when kept.
    Classes(TopKAccuracy, Vec<Prediction>),
    /// Against masks.
    Masks(SegmentAccuracy),
    /// Against boxes.
    Boxes(DetectAccuracy),
}

/// Scores batches of model outputs against one kind of ground truth.
pub(crate) trait Scorer {
    /// Scores `samples` (in order) with the model's outputs for them.
    fn score(&mut self, samples: &[Sample], outputs: &[HostTensor]) -> Result<()>;
    /// Images scored so far.
    fn images(&self) -> u64;
    /// The running figure, for the progress bar.
    fn status(&self) -> String;
    /// The figures.
    fn finish(self: Box<Self>) -> Result<Scored>;
}

/// Top-1/top-5 of `[N, classes]` scores against each image's label.
pub(crate) struct ClassScorer {
    acc: TopKAccuracy,
    classes: usize,
    keep: bool,
    predictions: Vec<Prediction>,
}

impl ClassScorer {
    /// A scorer for `classes` scores per image; `keep` keeps every image's top-5.
    pub fn new(classes: usize, keep: bool) -> Self {
        ClassScorer {
            acc: TopKAccuracy::default(),
            classes,
            keep,
            predictions: vec![],
        }
    }
}

impl Scorer for ClassScorer {
    fn score(&mut self, samples: &[Sample], outputs: &[HostTensor]) -> Result<()> {
        let first = outputs.first().context("the model gave no output")?;
        let scores = first.data.as_f32();
        if scores.len() < samples.len() * self.classes {
            bail!(
                "output '{}' {:?} holds fewer than {} scores for each of {} images",
                first.name,
                first.shape,
                self.classes,
                samples.len()
            );
        }
        // On this thread: a batch's top-5s take about a millisecond, and the pool is busy
        // decoding the next batches (a job queued there would wait behind them).
        let rows = &scores[..samples.len() * self.classes];
        let tops = rows.chunks(self.classes.max(1)).map(|row| top_k(row, 5));
        for (s, top5) in samples.iter().zip(tops) {
            self.acc.record(&top5, s.label);
            if self.keep {
                self.predictions.push(Prediction {
                    file: s.path.clone(),
                    label: s.label,
                    top5,
                });
            }
        }
        Ok(())
    }

    fn images(&self) -> u64 {
        self.acc.total
    }

    fn status(&self) -> String {
        format!(
            "top-1 {:.2}%  top-5 {:.2}%",
            self.acc.top1() * 100.0,
            self.acc.top5() * 100.0
        )
    }

    fn finish(self: Box<Self>) -> Result<Scored> {
        Ok(Scored::Classes(self.acc, self.predictions))
    }
}

/// mIoU and pixel accuracy of per-pixel classes against PNG masks seen through the same
/// resize-and-crop as the image (nearest pixel, on the output's grid).
pub(crate) struct MaskScorer {
    masks: Vec<PathBuf>,
    preprocess: Preprocess,
    confusion: Option<Confusion>,
    images: u64,
}

impl Scorer for MaskScorer {
    fn score(&mut self, samples: &[Sample], outputs: &[HostTensor]) -> Result<()> {
        let (name, labels, _, classes) = pixel_classes(outputs, "the model")?;
        let out = outputs
            .iter()
            .find(|t| t.name == name)
            .context("the model's mask output")?;
        let (out_h, out_w) = (
            out.shape[out.shape.len() - 2],
            out.shape[out.shape.len() - 1],
        );
        let per_image = out_h * out_w;
        if labels.len() != samples.len() * per_image {
            bail!(
                "output '{name}' {:?}: masks are checked on one {out_h}×{out_w} map per image, and this holds {} pixels for {} images",
                out.shape,
                labels.len(),
                samples.len()
            );
        }
        let confusion = self
            .confusion
            .get_or_insert_with(|| Confusion::new(classes));
        for (i, s) in samples.iter().enumerate() {
            let path = &self.masks[s.label];
            let mask = read_mask(path)?;
            let window = self
                .preprocess
                .window(mask.width, mask.height)
                .with_context(|| path.display().to_string())?;
            let truth = mask.sample_window(&window, out_w, out_h);
            confusion
                .add(
                    &truth,
                    &labels[i * per_image..(i + 1) * per_image],
                    Some(MASK_IGNORE),
                )
                .with_context(|| format!("{}: against the model's classes", path.display()))?;
            self.images += 1;
        }
        Ok(())
    }

    fn images(&self) -> u64 {
        self.images
    }

    fn status(&self) -> String {
        let c = self.confusion.as_ref();
        format!(
            "mIoU {:.4}  pixel accuracy {:.2}%",
            c.and_then(Confusion::mean_iou).unwrap_or(0.0),
            c.map(|c| c.agreement() * 100.0).unwrap_or(0.0)
        )
    }

    fn finish(self: Box<Self>) -> Result<Scored> {
        let c = self.confusion.unwrap_or_else(|| Confusion::new(0));
        Ok(Scored::Masks(SegmentAccuracy::from_confusion(
            &c,
            self.images as usize,
        )))
    }
}

/// COCO mAP of the decoded boxes, mapped back from the model's input to the image's pixels,
/// against the annotations.
pub(crate) struct BoxScorer {
    annotations: CocoAnnotations,
    preprocess: Preprocess,
    options: DetectOptions,
    truths: Vec<Vec<GroundTruth>>,
    found: Vec<Vec<Detection>>,
}

impl Scorer for BoxScorer {
    fn score(&mut self, samples: &[Sample], outputs: &[HostTensor]) -> Result<()> {
        let decoded = detections(outputs, &self.options)?;
        if decoded.images.len() < samples.len() {
            bail!(
                "the model gave boxes for {} images of a batch of {}",
                decoded.images.len(),
                samples.len()
            );
        }
        for (s, boxes) in samples.iter().zip(decoded.images) {
            let image = &self.annotations.images[s.label];
            let w = self.preprocess.window(image.width, image.height)?;
            let (sx, sy) = (
                image.width as f32 / w.resized_w as f32,
                image.height as f32 / w.resized_h as f32,
            );
            let to_image = |d: Detection| Detection {
                bbox: [
                    (d.bbox[0] + w.left as f32) * sx,
                    (d.bbox[1] + w.top as f32) * sy,
                    (d.bbox[2] + w.left as f32) * sx,
                    (d.bbox[3] + w.top as f32) * sy,
                ],
                ..d
            };
            self.found.push(boxes.into_iter().map(to_image).collect());
            self.truths.push(
                image
                    .boxes
                    .iter()
                    .map(|b| GroundTruth {
                        bbox: b.bbox,
                        class: b.class,
                        crowd: b.crowd,
                    })
                    .collect(),
            );
        }
        Ok(())
    }

    fn images(&self) -> u64 {
        self.found.len() as u64
    }

    fn status(&self) -> String {
        format!("{} images", self.found.len())
    }

    fn finish(self: Box<Self>) -> Result<Scored> {
        let map = evaluate(&self.truths, &self.found, COCO_MAX_DETECTIONS)?;
        Ok(Scored::Boxes(DetectAccuracy {
            images: self.found.len(),
            ground_truths: self.truths.iter().flatten().filter(|g| !g.crowd).count(),
            detections: self.found.iter().map(Vec::len).sum(),
            conf: self.options.conf,
            iou: self.options.iou,
            map,
        }))
    }
}

/// The images of a segmentation folder (by the folder walk's rule, [`crate::data::walk`]), each
/// with its mask (`x.jpg` → `masks/x.png`, `sub/x.jpg` → `masks/sub/x.png`), and what the walk
/// skipped; a missing mask, or one whose size is not its image's, is an error naming it.
fn masked_images(root: &Path, masks: &Path) -> Result<(Vec<Sample>, Vec<PathBuf>, Vec<Failure>)> {
    if !masks.is_dir() {
        bail!("{}: no such folder of masks", masks.display());
    }
    let walked = walk(root)?;
    let masks_under_root = masks_inside(root, masks);
    let mut images = vec![];
    let mut paths = vec![];
    for image in walked.files {
        let rel = image.strip_prefix(root).unwrap_or(&image);
        if masks_under_root
            .as_ref()
            .is_some_and(|m| rel.starts_with(m))
        {
            continue; // the masks themselves
        }
        let mut name = image.file_stem().unwrap_or_default().to_os_string();
        name.push(".png");
        let mask = masks.join(rel.parent().unwrap_or(Path::new(""))).join(name);
        if !mask.is_file() {
            bail!("{}: no mask for image {}", mask.display(), image.display());
        }
        images.push(image);
        paths.push(mask);
    }
    check_mask_sizes(&images, &paths)?;
    let samples = images
        .into_iter()
        .enumerate()
        .map(|(label, path)| Sample { path, label })
        .collect();
    Ok((samples, paths, walked.skipped))
}

/// Where the masks folder lies under the dataset folder, when it does (its images are masks).
fn masks_inside(root: &Path, masks: &Path) -> Option<PathBuf> {
    let (root, masks) = (root.canonicalize().ok()?, masks.canonicalize().ok()?);
    let rel = masks.strip_prefix(&root).ok()?;
    (!rel.as_os_str().is_empty()).then(|| rel.to_path_buf())
}

/// Refuses a mask whose size is not its image's, from the headers alone (nothing is decoded),
/// before anything runs. An image whose header cannot be read is left to the loader, which
/// skips it with its reason.
fn check_mask_sizes(images: &[PathBuf], masks: &[PathBuf]) -> Result<()> {
    let checked: Vec<Result<()>> = images
        .par_iter()
        .zip(masks)
        .map(|(image, mask)| {
            let Ok((iw, ih)) = image_size(image) else {
                return Ok(());
            };
            let (mw, mh) = mask_size(mask)?;
            if (mw, mh) == (iw, ih) {
                return Ok(());
            }
            let swapped = if (mw, mh) == (ih, iw) {
                " (width and height swapped?)"
            } else {
                ""
            };
            bail!(
                "{}: mask is {mw}×{mh} but its image {} is {iw}×{ih}{swapped}",
                mask.display(),
                image.display()
            )
        })
        .collect();
    checked.into_iter().collect()
}

/// Segmentation or detection ground truth, read before the model's preprocessing is known.
pub(crate) enum TaskTruth {
    /// One mask file per sample, by the sample's label.
    Masks(Vec<PathBuf>),
    /// COCO annotations; sample labels index their images.
    Coco(CocoAnnotations),
}

impl TaskTruth {
    /// The scorer of this ground truth for images preprocessed as `preprocess`.
    pub(crate) fn scorer(self, preprocess: &Preprocess, options: DetectOptions) -> Box<dyn Scorer> {
        match self {
            TaskTruth::Masks(masks) => Box::new(MaskScorer {
                masks,
                preprocess: preprocess.clone(),
                confusion: None,
                images: 0,
            }),
            TaskTruth::Coco(annotations) => Box::new(BoxScorer {
                annotations,
                preprocess: preprocess.clone(),
                options,
                truths: vec![],
                found: vec![],
            }),
        }
    }
}

/// The dataset and its segmentation or detection ground truth; `None` for a class per image.
pub(crate) fn task_truth(
    root: &Path,
    annotations: &Annotations,
) -> Result<Option<(Dataset, TaskTruth)>> {
    if !root.is_dir() {
        bail!("{}: no such folder", root.display());
    }
    let mut skipped = vec![];
    let (samples, truth) = match annotations {
        Annotations::Classes => return Ok(None),
        Annotations::Masks(dir) => {
            let (samples, masks, walk_skipped) = masked_images(root, dir)?;
            skipped = walk_skipped;
            (samples, TaskTruth::Masks(masks))
        }
        Annotations::Coco(file) => {
            let annotations = CocoAnnotations::read(file, root)?;
            let samples = annotations
                .images
                .iter()
                .enumerate()
                .map(|(label, im)| Sample {
                    path: im.path.clone(),
                    label,
                })
                .collect();
            (samples, TaskTruth::Coco(annotations))
        }
    };
    if samples.is_empty() {
        bail!("{}: the dataset has no images", root.display());
    }
    Ok(Some((
        Dataset {
            root: root.to_path_buf(),
            samples,
            class_names: vec![],
            skipped,
        },
        truth,
    )))
}

#[cfg(test)]
mod mask_walk_tests {
    use super::*;

    fn gray_png(path: &Path, w: u32, h: u32) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
        let mut enc = png::Encoder::new(file, w, h);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Eight);
        let data = vec![1u8; (w * h) as usize];
        enc.write_header().unwrap().write_image_data(&data).unwrap();
    }

    #[test]
    fn nested_images_take_nested_masks_and_masks_under_the_root_are_no_images() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let masks = root.join("masks");
        for (image, mask) in [("a.png", "a.png"), ("sub/b.png", "sub/b.png")] {
            gray_png(&root.join(image), 6, 4);
            gray_png(&masks.join(mask), 6, 4);
        }
        let (samples, paths, skipped) = masked_images(root, &masks).unwrap();
        let images: Vec<&Path> = samples.iter().map(|s| s.path.as_path()).collect();
        assert_eq!(images, [root.join("a.png"), root.join("sub/b.png")]);
        assert_eq!(paths, [masks.join("a.png"), masks.join("sub/b.png")]);
        assert!(skipped.is_empty());

        gray_png(&masks.join("sub/b.png"), 4, 6);
        let err = format!("{:#}", masked_images(root, &masks).unwrap_err());
        assert_eq!(
            err,
            format!(
                "{}: mask is 4×6 but its image {} is 6×4 (width and height swapped?)",
                masks.join("sub/b.png").display(),
                root.join("sub/b.png").display()
            )
        );
    }
}
