//! A flat dataset folder's labels file matched to the images the folder walk found: a
//! `file,label` CSV names each image by its path under the folder (`sub/x.jpg`) or, where no
//! other image has it, by its bare file name; one label per line pairs with the walk's order.

use super::sample::Sample;
use super::walk::Walk;
use anyhow::{bail, Result};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// `path` relative to `root`, with `/` between its parts (as a labels file writes it).
pub fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

/// The last part of a `/`-separated path.
fn bare(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Parses one label (line number, text) into a class index.
pub(crate) type ParseLabel<'a> = dyn Fn(usize, &str) -> Result<usize> + 'a;

/// The walk's images under `root`, indexed by relative path and by bare name.
pub(crate) struct Listing<'a> {
    root: &'a Path,
    files: &'a [PathBuf],
    relative: Vec<String>,
    /// Relative paths and bare names of what the walk skipped.
    skipped: HashSet<String>,
}

impl<'a> Listing<'a> {
    /// The images of `walk`, a walk of `root`.
    pub fn new(root: &'a Path, walk: &'a Walk) -> Listing<'a> {
        let paths: Vec<String> = walk.files.iter().map(|p| relative(root, p)).collect();
        let skipped = walk
            .skipped
            .iter()
            .flat_map(|f| {
                let rel = relative(root, &f.path);
                [bare(&rel).to_string(), rel]
            })
            .collect();
        Listing {
            root,
            files: &walk.files,
            relative: paths,
            skipped,
        }
    }

    /// Samples from a `file,label` CSV (a first line whose label is not a number and whose
    /// file is not an image is a header). A line naming an image the walk skipped is left out
    /// (the walk lists it with its reason).
    pub(crate) fn csv_samples(
        &self,
        labels: &Path,
        lines: &[(usize, &str)],
        parse_label: &ParseLabel<'_>,
    ) -> Result<Vec<Sample>> {
        let by_path: HashMap<&str, usize> = self
            .relative
            .iter()
            .enumerate()
            .map(|(i, r)| (r.as_str(), i))
            .collect();
        let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, r) in self.relative.iter().enumerate() {
            by_name.entry(bare(r)).or_default().push(i);
        }
        let find = |file: &str| -> Option<Vec<usize>> {
            let file = file.trim_start_matches("./");
            match by_path.get(file) {
                Some(&i) => Some(vec![i]),
                None => by_name.get(bare(file)).cloned(),
            }
        };
        let mut samples = Vec::new();
        let mut listed = vec![false; self.files.len()];
        for (k, &(line, l)) in lines.iter().enumerate() {
            let Some((file, label)) = l.rsplit_once(',') else {
                bail!("{} line {line}: expected 'file,label'", labels.display());
            };
            let file = file.trim().trim_matches('"');
            let found = find(file);
            if k == 0 && label.trim().parse::<usize>().is_err() && found.is_none() {
                continue; // a header line
            }
            let i = match found.as_deref() {
                Some(&[i]) => i,
                Some(many) => bail!(
                    "{} line {line}: '{file}' could be any of {} images ({}, {}, …); give its path relative to {}",
                    labels.display(),
                    many.len(),
                    self.relative[many[0]],
                    self.relative[many[1]],
                    self.root.display()
                ),
                None if self.skipped.contains(file.trim_start_matches("./"))
                    || self.skipped.contains(bare(file)) =>
                {
                    continue
                }
                None => bail!(
                    "{} line {line}: '{file}' is not an image in {}",
                    labels.display(),
                    self.root.display()
                ),
            };
            if std::mem::replace(&mut listed[i], true) {
                bail!("{} line {line}: '{file}' is listed twice", labels.display());
            }
            samples.push(Sample {
                path: self.files[i].clone(),
                label: parse_label(line, label)?,
            });
        }
        if let Some(i) = listed.iter().position(|l| !l) {
            bail!(
                "{}: image '{}' has no line in the labels file",
                labels.display(),
                self.relative[i]
            );
        }
        Ok(samples)
    }

    /// Samples from one label per line, paired with the images in the walk's order.
    pub(crate) fn line_samples(
        &self,
        labels: &Path,
        lines: &[(usize, &str)],
        parse_label: &ParseLabel<'_>,
    ) -> Result<Vec<Sample>> {
        let files = self.files;
        if lines.len() != files.len() {
            let first = if lines.len() < files.len() {
                format!("image '{}' has no label", self.relative[lines.len()])
            } else {
                format!("line {} has no image", lines[files.len()].0)
            };
            bail!(
                "{}: {} labels for {} images in sorted order; {first}",
                labels.display(),
                lines.len(),
                files.len()
            );
        }
        files
            .iter()
            .zip(lines)
            .map(|(path, &(line, l))| {
                Ok(Sample {
                    path: path.clone(),
                    label: parse_label(line, l)?,
                })
            })
            .collect()
    }
}
