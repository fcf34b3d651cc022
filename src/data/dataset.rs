//! Labelled image datasets: the ImageFolder layout (one sub-folder per class, sorted names →
//! class index, as torchvision's `ImageFolder`) or a flat folder with a labels file (`file,label`
//! CSV, or one label per line in sorted file order, as ILSVRC ground-truth files). A class map
//! (one class name per line) maps folder names or label names to the model's class indices.
//! Which files are read is [`super::walk`]'s rule, the same for every command.

use super::labels_file::Listing;
use super::walk::{is_hidden, walk, Failure, Walk};
use crate::error::{fix_with, Setting};
use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub(crate) use super::walk::IMAGE_EXTENSIONS;

pub(crate) use super::sample::Sample;

/// A labelled dataset, in a fixed order.
#[derive(Clone, Debug)]
pub(crate) struct Dataset {
    /// The folder it was read from.
    #[cfg_attr(not(test), allow(dead_code))]
    pub root: PathBuf,
    /// Samples, in order.
    pub samples: Vec<Sample>,
    /// Class names by index where known (folder names or the class map).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) class_names: Vec<String>,
    /// What the folder walk skipped (loops, broken links, unreadable folders and files, images
    /// outside any class folder), each with its reason.
    pub skipped: Vec<Failure>,
}

/// How labels are given.
#[derive(Clone, Debug, Default)]
pub struct DatasetOptions {
    /// A labels file for a flat folder; `None` = ImageFolder layout.
    pub labels: Option<PathBuf>,
    /// One class name per line; line i is class index i.
    pub(crate) class_map: Option<PathBuf>,
    /// Ground truth that is not one class per image: masks or boxes.
    pub annotations: Annotations,
}

/// The ground truth of a segmentation or detection dataset.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Annotations {
    /// One class per image (ImageFolder or a labels file).
    #[default]
    Classes,
    /// A folder of PNG masks named after the images (`x.jpg` → `x.png`), one class index per
    /// pixel (grayscale or palette indices); 255 marks pixels left out.
    Masks(PathBuf),
    /// A COCO-format annotations JSON; image paths are its `file_name`s under the dataset.
    Coco(PathBuf),
}

impl Annotations {
    /// The ground truth a masks folder or a COCO file names (masks win when both are given), or
    /// `None` when neither is: the one rule every place that reads the two settings follows.
    pub fn given(masks: Option<PathBuf>, coco: Option<PathBuf>) -> Option<Annotations> {
        match (masks, coco) {
            (Some(dir), _) => Some(Annotations::Masks(dir)),
            (_, Some(file)) => Some(Annotations::Coco(file)),
            _ => None,
        }
    }
}

/// The class folders of an ImageFolder root: its non-hidden sub-folders (links to folders
/// count), sorted by name.
fn class_folders(root: &Path) -> Result<Vec<PathBuf>> {
    let mut v = Vec::new();
    for entry in std::fs::read_dir(root)
        .with_context(|| format!("{}: cannot read the folder", root.display()))?
    {
        let path = entry
            .with_context(|| format!("{}: cannot read the folder", root.display()))?
            .path();
        if path.file_name().is_some_and(|n| !is_hidden(n)) && path.is_dir() {
            v.push(path);
        }
    }
    v.sort();
    Ok(v)
}

/// The walk's files sorted into their class folders (by the first part of their path under
/// `root`); images outside every class folder go to `skipped`.
fn by_class(
    root: &Path,
    classes: &[PathBuf],
    files: Vec<PathBuf>,
    skipped: &mut Vec<Failure>,
) -> Vec<Vec<PathBuf>> {
    let index: HashMap<&std::ffi::OsStr, usize> = classes
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.file_name().map(|n| (n, i)))
        .collect();
    let mut out = vec![Vec::new(); classes.len()];
    for file in files {
        let rel = file.strip_prefix(root).unwrap_or(&file);
        let class = (rel.components().count() > 1)
            .then(|| rel.components().next())
            .flatten()
            .and_then(|c| index.get(c.as_os_str()));
        match class {
            Some(&i) => out[i].push(file),
            None => skipped.push(Failure {
                path: file,
                reason: "not in a class folder (an ImageFolder image's class is its folder)".into(),
            }),
        }
    }
    out
}

/// A class folder without images: an error, since it would shift every later class index;
/// only a warning with a class map, whose indices do not depend on the folders present.
fn empty_class(dir: &Path, skipped: &[Failure], mapped: bool) -> Result<()> {
    let why = skipped
        .iter()
        .find(|f| f.path == dir)
        .map(|f| format!(" ({})", f.reason))
        .unwrap_or_default();
    if mapped {
        tracing::warn!("{}: class folder has no images{why}", dir.display());
        return Ok(());
    }
    Err(fix_with(
        Setting::ClassMap,
        format!(
            "{}: class folder has no images{why}; remove it, or give a class map so class indices do not depend on the folders present",
            dir.display()
        ),
    ))
}

/// Reads a class map: one class name per line (blank lines and surrounding space ignored;
/// an ImageNet `synset_words.txt` line `n01440764 tench, Tinca tinca` maps by its first word).
pub(crate) fn read_class_map(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read the class map", path.display()))?;
    let names: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().next().unwrap_or(l).to_string())
        .collect();
    if names.is_empty() {
        bail!("{}: the class map has no class names", path.display());
    }
    let mut seen = HashMap::new();
    for (i, n) in names.iter().enumerate() {
        if let Some(j) = seen.insert(n.as_str(), i) {
            bail!(
                "{}: class '{n}' appears on lines {} and {}",
                path.display(),
                j + 1,
                i + 1
            );
        }
    }
    Ok(names)
}

impl Dataset {
    /// Reads the dataset at `root`.
    pub fn open(root: &Path, options: &DatasetOptions) -> Result<Dataset> {
        if !root.is_dir() {
            bail!("{}: no such folder", root.display());
        }
        let class_map = options
            .class_map
            .as_deref()
            .map(read_class_map)
            .transpose()?;
        let ds = match &options.labels {
            Some(labels) => Self::flat(root, labels, class_map)?,
            None => Self::image_folder(root, class_map)?,
        };
        if ds.samples.is_empty() {
            bail!("{}: the dataset has no images", root.display());
        }
        Ok(ds)
    }

    fn image_folder(root: &Path, class_map: Option<Vec<String>>) -> Result<Dataset> {
        let Walk { files, mut skipped } = walk(root)?;
        let classes = class_folders(root)?;
        if classes.is_empty() {
            let loose = files.len();
            if loose > 0 {
                return Err(fix_with(
                    Setting::Labels,
                    format!(
                        "{}: no class sub-folders but {loose} images; give their labels in a file",
                        root.display()
                    ),
                ));
            }
            bail!(
                "{}: the dataset is empty (no class sub-folders, no images)",
                root.display()
            );
        }
        let names: Vec<String> = classes
            .iter()
            .map(|p| {
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let labels: Vec<usize> = match &class_map {
            Some(map) => {
                let lookup: HashMap<&str, usize> = map
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n.as_str(), i))
                    .collect();
                names
                    .iter()
                    .map(|name| {
                        lookup.get(name.as_str()).copied().with_context(|| {
                            format!(
                                "{}: class folder '{name}' is not in the class map",
                                root.display()
                            )
                        })
                    })
                    .collect::<Result<_>>()?
            }
            None => (0..names.len()).collect(),
        };
        let per_class = by_class(root, &classes, files, &mut skipped);
        if per_class.iter().all(Vec::is_empty) {
            bail!(
                "{}: {} class folders but no images in them (looked for {})",
                root.display(),
                classes.len(),
                IMAGE_EXTENSIONS.join(", ")
            );
        }
        let mut samples = Vec::new();
        for ((dir, files), &label) in classes.iter().zip(per_class).zip(&labels) {
            if files.is_empty() {
                empty_class(dir, &skipped, class_map.is_some())?;
            }
            samples.extend(files.into_iter().map(|path| Sample { path, label }));
        }
        Ok(Dataset {
            root: root.to_path_buf(),
            samples,
            class_names: class_map.unwrap_or(names),
            skipped,
        })
    }

    fn flat(root: &Path, labels: &Path, class_map: Option<Vec<String>>) -> Result<Dataset> {
        let text = std::fs::read_to_string(labels)
            .with_context(|| format!("{}: cannot read the labels file", labels.display()))?;
        let lines: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty())
            .collect();
        let walked = walk(root)?;
        if walked.files.is_empty() {
            bail!("{}: the folder has no images", root.display());
        }
        let lookup: Option<HashMap<&str, usize>> = class_map
            .as_ref()
            .map(|m| m.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect());
        let parse_label = |line: usize, s: &str| -> Result<usize> {
            let s = s.trim();
            if let Ok(i) = s.parse::<usize>() {
                return Ok(i);
            }
            match &lookup {
                Some(l) => l.get(s).copied().with_context(|| {
                    format!("{} line {line}: label '{s}' is not in the class map", labels.display())
                }),
                None => Err(fix_with(
                    Setting::ClassMap,
                    format!(
                        "{} line {line}: label '{s}' is not a class index (a class map turns names into indices)",
                        labels.display()
                    ),
                )),
            }
        };
        let files = Listing::new(root, &walked);
        let samples = if lines.iter().any(|(_, l)| l.contains(',')) {
            files.csv_samples(labels, &lines, &parse_label)?
        } else {
            files.line_samples(labels, &lines, &parse_label)?
        };
        Ok(Dataset {
            root: root.to_path_buf(),
            samples,
            class_names: class_map.unwrap_or_default(),
            skipped: walked.skipped,
        })
    }

    /// Shuffles with a stable seed (the same seed gives the same order on every machine).
    pub fn shuffle(&mut self, seed: u64) {
        let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            // splitmix64
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        for i in (1..self.samples.len()).rev() {
            let j = (next() % (i as u64 + 1)) as usize;
            self.samples.swap(i, j);
        }
    }

    /// Keeps the first `n` samples.
    pub fn limit(&mut self, n: usize) {
        self.samples.truncate(n);
    }

    /// The largest label, for checking against the model's number of classes.
    pub(crate) fn max_label(&self) -> Option<&Sample> {
        self.samples.iter().max_by_key(|s| s.label)
    }
}

#[cfg(test)]
mod walk_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    #[test]
    fn image_folder_sorts_classes_and_files() {
        let d = tempfile::tempdir().unwrap();
        for f in [
            "b/2.jpg",
            "b/1.PNG",
            "a/z.jpeg",
            "a/notes.txt",
            "c/.keep",
            "c/d.png",
        ] {
            touch(&d.path().join(f));
        }
        let ds = Dataset::open(d.path(), &DatasetOptions::default()).unwrap();
        let got: Vec<(String, usize)> = ds
            .samples
            .iter()
            .map(|s| {
                (
                    s.path.strip_prefix(d.path()).unwrap().display().to_string(),
                    s.label,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("a/z.jpeg".into(), 0),
                ("b/1.PNG".into(), 1),
                ("b/2.jpg".into(), 1),
                ("c/d.png".into(), 2)
            ]
        );
        assert_eq!(ds.class_names, vec!["a", "b", "c"]);
    }

    #[test]
    fn class_map_renumbers_folders() {
        let d = tempfile::tempdir().unwrap();
        touch(&d.path().join("data/n02/x.jpg"));
        touch(&d.path().join("data/n01/y.jpg"));
        let map = d.path().join("map.txt");
        std::fs::write(&map, "n00 something\nn01 tench, Tinca\nn02\n").unwrap();
        let opts = DatasetOptions {
            class_map: Some(map.clone()),
            ..Default::default()
        };
        let ds = Dataset::open(&d.path().join("data"), &opts).unwrap();
        assert_eq!(ds.samples[0].label, 1);
        assert_eq!(ds.samples[1].label, 2);
        std::fs::write(&map, "n00\nn01\n").unwrap();
        let err = Dataset::open(&d.path().join("data"), &opts).unwrap_err();
        assert!(format!("{err:#}").contains("'n02' is not in the class map"));
    }

    #[test]
    fn flat_folder_with_csv_and_line_labels() {
        let d = tempfile::tempdir().unwrap();
        for f in ["img/b.jpg", "img/a.jpg", "img/c.png"] {
            touch(&d.path().join(f));
        }
        let csv = d.path().join("labels.csv");
        std::fs::write(&csv, "file,label\nc.png,2\na.jpg,0\nb.jpg,7\n").unwrap();
        let ds = Dataset::open(
            &d.path().join("img"),
            &DatasetOptions {
                labels: Some(csv.clone()),
                ..Default::default()
            },
        )
        .unwrap();
        let labels: Vec<usize> = ds.samples.iter().map(|s| s.label).collect();
        assert_eq!(labels, vec![2, 0, 7]);

        let lines = d.path().join("gt.txt");
        std::fs::write(&lines, "5\n6\n7\n").unwrap();
        let opts = DatasetOptions {
            labels: Some(lines.clone()),
            ..Default::default()
        };
        let ds = Dataset::open(&d.path().join("img"), &opts).unwrap();
        assert_eq!(ds.samples[0].path.file_name().unwrap(), "a.jpg");
        assert_eq!(
            ds.samples.iter().map(|s| s.label).collect::<Vec<_>>(),
            vec![5, 6, 7]
        );

        std::fs::write(&lines, "5\n6\n").unwrap();
        let err = format!(
            "{:#}",
            Dataset::open(&d.path().join("img"), &opts).unwrap_err()
        );
        assert!(
            err.contains("2 labels for 3 images") && err.contains("'c.png' has no label"),
            "{err}"
        );

        std::fs::write(&csv, "a.jpg,0\nb.jpg,1\nd.jpg,2\n").unwrap();
        let opts = DatasetOptions {
            labels: Some(csv),
            ..Default::default()
        };
        let err = format!(
            "{:#}",
            Dataset::open(&d.path().join("img"), &opts).unwrap_err()
        );
        assert!(err.contains("line 3: 'd.jpg' is not an image"), "{err}");
    }

    #[test]
    fn empty_inputs_are_errors() {
        let d = tempfile::tempdir().unwrap();
        let err = format!(
            "{:#}",
            Dataset::open(d.path(), &DatasetOptions::default()).unwrap_err()
        );
        assert!(err.contains("the dataset is empty"), "{err}");
        std::fs::create_dir(d.path().join("cls")).unwrap();
        touch(&d.path().join("cls/readme.txt"));
        let err = format!(
            "{:#}",
            Dataset::open(d.path(), &DatasetOptions::default()).unwrap_err()
        );
        assert!(err.contains("no images in them"), "{err}");
    }

    #[test]
    fn shuffle_is_stable_and_a_permutation() {
        let samples: Vec<Sample> = (0..50)
            .map(|i| Sample {
                path: PathBuf::from(format!("{i}.jpg")),
                label: i,
            })
            .collect();
        let mut a = Dataset {
            root: PathBuf::new(),
            samples: samples.clone(),
            class_names: vec![],
            skipped: vec![],
        };
        let mut b = a.clone();
        a.shuffle(7);
        b.shuffle(7);
        assert_eq!(a.samples, b.samples);
        assert_ne!(a.samples, samples);
        let mut labels: Vec<usize> = a.samples.iter().map(|s| s.label).collect();
        labels.sort();
        assert_eq!(labels, (0..50).collect::<Vec<_>>());
        a.limit(5);
        assert_eq!(a.samples.len(), 5);
    }
}
