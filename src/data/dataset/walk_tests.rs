//! The dataset reads its folder by the walk's rule: hidden folders, empty class folders, nested
//! images, links and labels files that name nested images.

use super::*;
use crate::error::{hint_of, Hint};
use std::os::unix::fs::symlink;

fn touch(p: &Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, b"x").unwrap();
}

fn samples(ds: &Dataset) -> Vec<(String, usize)> {
    ds.samples
        .iter()
        .map(|s| {
            let rel = s.path.strip_prefix(&ds.root).unwrap();
            (rel.display().to_string(), s.label)
        })
        .collect()
}

fn skipped(ds: &Dataset) -> Vec<(String, String)> {
    ds.skipped
        .iter()
        .map(|f| {
            let rel = f.path.strip_prefix(&ds.root).unwrap();
            (rel.display().to_string(), f.reason.clone())
        })
        .collect()
}

#[test]
fn an_empty_class_folder_is_an_error_unless_a_class_map_is_given() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("val");
    touch(&root.join("a/x.jpg"));
    std::fs::create_dir_all(root.join("b")).unwrap();
    touch(&root.join("b/notes.txt"));
    touch(&root.join("c/y.jpg"));
    let err = Dataset::open(&root, &DatasetOptions::default()).unwrap_err();
    assert_eq!(hint_of(&err), Some(&Hint::Change(Setting::ClassMap)));
    let text = format!("{err:#}");
    assert!(
        text.starts_with(&format!(
            "{}: class folder has no images; remove it",
            root.join("b").display()
        )),
        "{text}"
    );
    assert!(
        text.contains("class indices do not depend on the folders present"),
        "{text}"
    );

    let map = d.path().join("map.txt");
    std::fs::write(&map, "a\nb\nc\nd\n").unwrap();
    let opts = DatasetOptions {
        class_map: Some(map),
        ..Default::default()
    };
    let ds = Dataset::open(&root, &opts).unwrap();
    assert_eq!(samples(&ds), [("a/x.jpg".into(), 0), ("c/y.jpg".into(), 2)]);
}

#[test]
fn hidden_folders_are_not_classes() {
    let d = tempfile::tempdir().unwrap();
    for f in [
        ".ipynb_checkpoints/x-checkpoint.jpg",
        "a/1.jpg",
        "a/.ipynb_checkpoints/1-checkpoint.jpg",
        "b/2.jpg",
    ] {
        touch(&d.path().join(f));
    }
    let ds = Dataset::open(d.path(), &DatasetOptions::default()).unwrap();
    assert_eq!(ds.class_names, ["a", "b"]);
    assert_eq!(samples(&ds), [("a/1.jpg".into(), 0), ("b/2.jpg".into(), 1)]);
    assert!(ds.skipped.is_empty());
}

#[test]
fn nested_images_belong_to_their_class_and_every_skip_is_listed() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("val");
    for f in ["090/2.jpg", "090/sub/deep/1.png", "091/3.jpg", "loose.jpg"] {
        touch(&root.join(f));
    }
    touch(&d.path().join("elsewhere/4.jpg"));
    symlink("..", root.join("090/dirloop")).unwrap();
    symlink("nowhere.jpg", root.join("091/gone.jpg")).unwrap();
    symlink("../elsewhere", root.join("092")).unwrap();
    let ds = Dataset::open(&root, &DatasetOptions::default()).unwrap();
    assert_eq!(ds.class_names, ["090", "091", "092"]);
    assert_eq!(
        samples(&ds),
        [
            ("090/2.jpg".into(), 0),
            ("090/sub/deep/1.png".into(), 0),
            ("091/3.jpg".into(), 1),
            ("092/4.jpg".into(), 2)
        ]
    );
    let skipped = skipped(&ds);
    let paths: Vec<&str> = skipped.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["090/dirloop", "091/gone.jpg", "loose.jpg"]);
    assert!(skipped[0].1.contains("loop"), "{skipped:?}");
    assert!(skipped[1].1.contains("broken symbolic link"), "{skipped:?}");
    assert!(
        skipped[2].1.contains("not in a class folder"),
        "{skipped:?}"
    );
}

#[test]
fn labels_files_name_nested_images_by_path_or_unique_name() {
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("img");
    for f in ["a.jpg", "sub/b.jpg", "sub2/b.jpg", "sub2/c.png"] {
        touch(&img.join(f));
    }
    let csv = d.path().join("labels.csv");
    let opts = DatasetOptions {
        labels: Some(csv.clone()),
        ..Default::default()
    };
    std::fs::write(
        &csv,
        "file,label\nc.png,3\n./a.jpg,0\nsub2/b.jpg,2\nsub/b.jpg,1\n",
    )
    .unwrap();
    let ds = Dataset::open(&img, &opts).unwrap();
    assert_eq!(
        samples(&ds),
        [
            ("sub2/c.png".into(), 3),
            ("a.jpg".into(), 0),
            ("sub2/b.jpg".into(), 2),
            ("sub/b.jpg".into(), 1)
        ]
    );
    std::fs::write(&csv, "a.jpg,0\nb.jpg,1\n").unwrap();
    let err = format!("{:#}", Dataset::open(&img, &opts).unwrap_err());
    assert!(
        err.contains("line 2: 'b.jpg' could be any of 2 images (sub/b.jpg, sub2/b.jpg")
            && err.contains("give its path relative to"),
        "{err}"
    );
    std::fs::write(&csv, "a.jpg,0\nsub/b.jpg,1\nsub2/b.jpg,1\n").unwrap();
    let err = format!("{:#}", Dataset::open(&img, &opts).unwrap_err());
    assert!(err.contains("image 'sub2/c.png' has no line"), "{err}");

    // A line naming an image the walk skipped is left out; the walk lists it.
    symlink("nowhere.jpg", img.join("gone.jpg")).unwrap();
    std::fs::write(
        &csv,
        "a.jpg,0\nsub/b.jpg,1\nsub2/b.jpg,1\nsub2/c.png,2\ngone.jpg,4\n",
    )
    .unwrap();
    let ds = Dataset::open(&img, &opts).unwrap();
    assert_eq!(ds.samples.len(), 4);
    assert_eq!(skipped(&ds)[0].0, "gone.jpg");

    // One label per line follows the walk's order.
    std::fs::remove_file(img.join("gone.jpg")).unwrap();
    let lines = d.path().join("gt.txt");
    std::fs::write(&lines, "5\n6\n7\n8\n").unwrap();
    let opts = DatasetOptions {
        labels: Some(lines),
        ..Default::default()
    };
    let ds = Dataset::open(&img, &opts).unwrap();
    assert_eq!(
        samples(&ds),
        [
            ("a.jpg".into(), 5),
            ("sub/b.jpg".into(), 6),
            ("sub2/b.jpg".into(), 7),
            ("sub2/c.png".into(), 8)
        ]
    );
}
