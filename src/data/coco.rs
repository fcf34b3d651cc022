//! COCO-format detection annotations (`instances_*.json`): the images, their ground-truth boxes
//! and the categories. A model's class k is the k-th category in ascending id order (the
//! 80 COCO classes of a YOLO export map onto ids 1–90 that way).

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
struct FileImage {
    id: i64,
    file_name: String,
    width: usize,
    height: usize,
}

#[derive(Deserialize)]
struct FileAnnotation {
    image_id: i64,
    category_id: i64,
    bbox: [f64; 4],
    #[serde(default)]
    iscrowd: u8,
}

#[derive(Deserialize)]
struct FileCategory {
    id: i64,
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct AnnotationFile {
    images: Vec<FileImage>,
    #[serde(default)]
    annotations: Vec<FileAnnotation>,
    categories: Vec<FileCategory>,
}

/// One ground-truth box, in the image's own pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct GroundTruthBox {
    /// x1, y1, x2, y2.
    pub bbox: [f32; 4],
    /// Class index (position of its category in ascending id order).
    pub class: usize,
    /// A crowd region (`iscrowd: 1`): detections on it are neither right nor wrong.
    pub(crate) crowd: bool,
}

/// One annotated image.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AnnotatedImage {
    /// The image file (the images folder joined with `file_name`).
    pub path: PathBuf,
    /// Its size as the annotations say, pixels.
    pub width: usize,
    /// Its height, pixels.
    pub height: usize,
    /// Its boxes.
    pub boxes: Vec<GroundTruthBox>,
}

/// The annotations read from a COCO file, in the file's image order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CocoAnnotations {
    /// Every image of the file.
    pub images: Vec<AnnotatedImage>,
    /// Category names by class index.
    pub(crate) class_names: Vec<String>,
    /// Category ids by class index (ascending).
    pub(crate) category_ids: Vec<i64>,
}

impl CocoAnnotations {
    /// Reads `file`, with image paths under `images_dir`. An annotation naming an unknown image
    /// or category, or a box with a negative size, is an error naming the file.
    pub fn read(file: &Path, images_dir: &Path) -> Result<Self> {
        let shown = file.display();
        let text =
            std::fs::read_to_string(file).with_context(|| format!("{shown}: cannot read"))?;
        let parsed: AnnotationFile = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{shown}: not COCO annotations: {e}"))?;
        let mut categories: Vec<&FileCategory> = parsed.categories.iter().collect();
        categories.sort_by_key(|c| c.id);
        let class_of: HashMap<i64, usize> = categories
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id, i))
            .collect();
        let index_of: HashMap<i64, usize> = parsed
            .images
            .iter()
            .enumerate()
            .map(|(i, im)| (im.id, i))
            .collect();
        let mut images: Vec<AnnotatedImage> = parsed
            .images
            .iter()
            .map(|im| AnnotatedImage {
                path: images_dir.join(&im.file_name),
                width: im.width,
                height: im.height,
                boxes: vec![],
            })
            .collect();
        for (n, a) in parsed.annotations.iter().enumerate() {
            let image = *index_of.get(&a.image_id).with_context(|| {
                format!(
                    "{shown}: annotation {n} names image id {}, which is not in 'images'",
                    a.image_id
                )
            })?;
            let class = *class_of.get(&a.category_id).with_context(|| {
                format!(
                    "{shown}: annotation {n} names category id {}, which is not in 'categories'",
                    a.category_id
                )
            })?;
            let [x, y, w, h] = a.bbox;
            if !(w >= 0.0 && h >= 0.0 && x.is_finite() && y.is_finite()) {
                bail!("{shown}: annotation {n} has bbox {:?}: [x, y, width, height] with a negative or missing size", a.bbox);
            }
            images[image].boxes.push(GroundTruthBox {
                bbox: [x as f32, y as f32, (x + w) as f32, (y + h) as f32],
                class,
                crowd: a.iscrowd != 0,
            });
        }
        Ok(CocoAnnotations {
            images,
            class_names: categories.iter().map(|c| c.name.clone()).collect(),
            category_ids: categories.iter().map(|c| c.id).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_category_ids_and_bad_references_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.json");
        std::fs::write(
            &file,
            r#"{"images":[{"id":7,"file_name":"x.jpg","width":40,"height":30}],
               "annotations":[{"image_id":7,"category_id":90,"bbox":[1,2,3,4]},
                              {"image_id":7,"category_id":3,"bbox":[0,0,5,5],"iscrowd":1}],
               "categories":[{"id":90,"name":"toothbrush"},{"id":3,"name":"car"}]}"#,
        )
        .unwrap();
        let a = CocoAnnotations::read(&file, Path::new("imgs")).unwrap();
        assert_eq!(a.class_names, ["car", "toothbrush"]);
        assert_eq!(a.images[0].path, Path::new("imgs/x.jpg"));
        assert_eq!(a.images[0].boxes[0].bbox, [1.0, 2.0, 4.0, 6.0]);
        assert_eq!(a.images[0].boxes[0].class, 1);
        assert!(a.images[0].boxes[1].crowd && a.images[0].boxes[1].class == 0);
        std::fs::write(
            &file,
            r#"{"images":[],"annotations":[{"image_id":1,"category_id":1,"bbox":[0,0,1,1]}],"categories":[]}"#,
        )
        .unwrap();
        let e = CocoAnnotations::read(&file, dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("a.json") && e.contains("image id 1"), "{e}");
        std::fs::write(&file, "[1, 2]").unwrap();
        let e = CocoAnnotations::read(&file, dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("a.json: not COCO annotations"), "{e}");
    }
}
