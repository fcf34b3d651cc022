//! How the check samples are kept apart from the tuning samples, and whether they truly are.
//! Crops or frames of one photo are alike: a check sample cut from a photo the search tuned on
//! scores like a tuning sample and overstates how the model does on other photos. So a split
//! of one source is made by file (every sample of a file on one side), and the report says
//! which files the two parts share, with a warning where they share any.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// How the check samples were chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitKind {
    /// No check set.
    #[default]
    None,
    /// Whole files of `--eval-data` kept apart (every sample of a file on one side).
    ByFile,
    /// Single samples of `--eval-data` kept apart: its samples are in one file, or its files
    /// are not known.
    BySample,
    /// A separate source, `--check-data`.
    Separate,
}

/// Where the check samples came from and what they share with the tuning samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckOrigin {
    /// How the check samples were chosen.
    pub split: SplitKind,
    /// Source files of the tuning samples (0 where the source has no files).
    pub tune_files: usize,
    /// Source files of the check samples.
    pub check_files: usize,
    /// Files with samples on both sides, by name.
    pub shared_files: Vec<String>,
    /// What the sharing means for the check score, when the parts share files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl CheckOrigin {
    /// The origin of a check set from `split`, the files of the tuning and the check samples
    /// (`(file, samples)` each), with the warning where they share files.
    pub(crate) fn of(
        split: SplitKind,
        tune: &[(PathBuf, usize)],
        check: &[(PathBuf, usize)],
    ) -> CheckOrigin {
        let names = |files: &[(PathBuf, usize)]| -> BTreeSet<PathBuf> {
            files
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(f, _)| canonical(f))
                .collect()
        };
        let (t, c) = (names(tune), names(check));
        let shared: Vec<String> = t.intersection(&c).map(|f| file_name(f)).collect();
        let warning = (!shared.is_empty()).then(|| {
            format!(
                "the check samples share {} of their files with the tuning samples ({}): crops of one photo on both sides overstate the check score; give --check-data with samples of other photos",
                shared.len(),
                shown_list(&shared)
            )
        });
        CheckOrigin {
            split,
            tune_files: t.len(),
            check_files: c.len(),
            shared_files: shared,
            warning,
        }
    }
}

/// `path` made absolute where it can be, to compare files named two ways.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A file's name, for a report line.
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Up to three names, then how many more.
fn shown_list(names: &[String]) -> String {
    let mut out = names.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 3 {
        out += &format!(" and {} more", names.len() - 3);
    }
    out
}

/// The tuning and check sample indices of samples grouped in files (`rows`: samples per file,
/// in order): files in a shuffle seeded by `seed` go to the check part until it holds
/// `fraction` of the samples (rounded, at least one), leaving at least one file for tuning; both
/// sorted. `None` with fewer than two files. With one sample per file this is the split of single
/// samples.
pub(crate) fn split_by_file(
    rows: &[usize],
    fraction: f64,
    seed: u64,
) -> Option<(Vec<usize>, Vec<usize>)> {
    if rows.len() < 2 {
        return None;
    }
    let n: usize = rows.iter().sum();
    let want = ((n as f64 * fraction).round() as usize).clamp(1, n.saturating_sub(1));
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    let starts: Vec<usize> = rows
        .iter()
        .scan(0, |at, &r| {
            let s = *at;
            *at += r;
            Some(s)
        })
        .collect();
    let (mut tune, mut check) = (vec![], vec![]);
    let mut taken = 0;
    for (k, &file) in order.iter().enumerate() {
        let samples = starts[file]..starts[file] + rows[file];
        let last_file_left = k + 1 == order.len();
        if taken < want && !last_file_left {
            taken += rows[file];
            check.extend(samples);
        } else {
            tune.extend(samples);
        }
    }
    tune.sort_unstable();
    check.sort_unstable();
    Some((tune, check))
}

/// The files (with their samples) that the samples at `indices` come from, given the files of
/// all samples in order.
pub(crate) fn files_of(files: &[(PathBuf, usize)], indices: &[usize]) -> Vec<(PathBuf, usize)> {
    let mut out: Vec<(PathBuf, usize)> = vec![];
    let (mut file, mut end) = (0, files.first().map_or(0, |f| f.1));
    for &i in indices {
        while i >= end && file + 1 < files.len() {
            file += 1;
            end += files[file].1;
        }
        if i >= end {
            break;
        }
        match out.last_mut() {
            Some((f, n)) if *f == files[file].0 => *n += 1,
            _ => out.push((files[file].0.clone(), 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantize::eval_samples::split_indices;

    #[test]
    fn a_split_by_file_keeps_each_file_on_one_side() {
        // Four files of 4 samples, one of 2.
        let rows = [4, 4, 4, 4, 2];
        let (tune, check) = split_by_file(&rows, 0.25, 0).unwrap();
        assert_eq!(tune.len() + check.len(), 18);
        assert!(check.len() >= 4 && !tune.is_empty(), "{check:?}");
        let file_of = |i: usize| i / 4;
        let tuned: BTreeSet<usize> = tune.iter().map(|&i| file_of(i)).collect();
        let checked: BTreeSet<usize> = check.iter().map(|&i| file_of(i)).collect();
        assert!(tuned.is_disjoint(&checked), "{tuned:?} {checked:?}");
        // One file cannot be split by file.
        assert!(split_by_file(&[16], 0.25, 0).is_none());
        // One sample per file: the split of single samples.
        assert_eq!(
            split_by_file(&[1; 11], 0.25, 3).unwrap(),
            split_indices(11, 0.25, 3)
        );
        // Two files: one on each side, whatever the share.
        let (t, c) = split_by_file(&[5, 5], 0.9, 0).unwrap();
        assert_eq!((t.len(), c.len()), (5, 5));
    }

    #[test]
    fn shared_files_are_named_with_a_warning() {
        let f = |name: &str, n| (PathBuf::from(name), n);
        let all = [f("a.npy", 3), f("b.npy", 2)];
        assert_eq!(files_of(&all, &[0, 2, 4]), [f("a.npy", 2), f("b.npy", 1)]);
        assert_eq!(files_of(&all, &[3]), [f("b.npy", 1)]);
        let apart = CheckOrigin::of(SplitKind::ByFile, &[f("a.npy", 3)], &[f("b.npy", 2)]);
        assert!(apart.shared_files.is_empty() && apart.warning.is_none());
        assert_eq!((apart.tune_files, apart.check_files), (1, 1));
        let one = CheckOrigin::of(
            SplitKind::BySample,
            &[f("calib.npy", 12)],
            &[f("calib.npy", 4)],
        );
        assert_eq!(one.shared_files, ["calib.npy"]);
        let warning = one.warning.unwrap();
        assert!(
            warning.contains("(calib.npy)") && warning.contains("overstate"),
            "{warning}"
        );
    }
}
