use super::*;
use std::os::unix::fs::symlink;

fn touch(p: &Path) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, b"x").unwrap();
}

fn relative(root: &Path, paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.strip_prefix(root).unwrap().display().to_string())
        .collect()
}

fn reasons(root: &Path, walk: &Walk) -> Vec<(String, String)> {
    walk.skipped
        .iter()
        .map(|f| {
            (
                f.path.strip_prefix(root).unwrap().display().to_string(),
                f.reason.clone(),
            )
        })
        .collect()
}

/// The order calibration caches were hashed in before the walk: every image at any depth,
/// sorted by full path.
fn sorted_paths(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sorted_paths(&p, out);
        } else if is_image(&p) {
            out.push(p);
        }
    }
    out.sort();
}

#[test]
fn flat_and_nested_orders_are_the_sorted_paths() {
    let d = tempfile::tempdir().unwrap();
    let names = [
        "b.jpg",
        "a.PNG",
        "a.jpeg",
        "A.jpg",
        "b",
        "b.jpg.txt",
        "c-1.jpg",
        "c.jpg",
        "c0.png",
    ];
    for f in names.iter().filter(|f| **f != "b") {
        touch(&d.path().join(f));
    }
    for f in [
        "b/x.jpg",
        "b/a/z.png",
        "b.d/y.jpg",
        "b-/q.jpg",
        "b/x/deeper/k.jpg",
    ] {
        touch(&d.path().join(f));
    }
    let w = walk(d.path()).unwrap();
    let mut old = Vec::new();
    sorted_paths(d.path(), &mut old);
    assert_eq!(w.files, old);
    assert!(w.skipped.is_empty(), "{:?}", w.skipped);
    assert_eq!(
        relative(d.path(), &w.files)[..4],
        ["A.jpg", "a.PNG", "a.jpeg", "b/a/z.png"]
    );
}

#[test]
fn hidden_entries_and_other_files_are_not_read() {
    let d = tempfile::tempdir().unwrap();
    for f in [
        "cls/x.jpg",
        "cls/.hidden.jpg",
        "cls/.ipynb_checkpoints/x-checkpoint.jpg",
        ".ipynb_checkpoints/y.jpg",
        "cls/notes.txt",
        "cls/deep/er/z.Jpg",
    ] {
        touch(&d.path().join(f));
    }
    let w = walk(d.path()).unwrap();
    assert_eq!(
        relative(d.path(), &w.files),
        ["cls/deep/er/z.Jpg", "cls/x.jpg"]
    );
    assert!(w.skipped.is_empty());
}

#[test]
fn loops_and_broken_links_are_skipped_and_listed() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("val");
    touch(&root.join("090/a.jpg"));
    touch(&root.join("091/b.jpg"));
    touch(&d.path().join("outside/c.jpg"));
    symlink("..", root.join("090/dirloop")).unwrap();
    symlink("nowhere.jpg", root.join("090/gone.jpg")).unwrap();
    symlink("nowhere", root.join("090/gone_dir")).unwrap();
    symlink("nowhere.txt", root.join("090/gone.txt")).unwrap();
    symlink("../091", root.join("090/same_as_091")).unwrap();
    symlink("../outside", root.join("092")).unwrap();
    symlink("../091/b.jpg", root.join("090/b_link.jpg")).unwrap();
    let w = walk(&root).unwrap();
    assert_eq!(
        relative(&root, &w.files),
        [
            "090/a.jpg",
            "090/b_link.jpg",
            "090/same_as_091/b.jpg",
            "092/c.jpg"
        ]
    );
    let skipped = reasons(&root, &w);
    let names: Vec<&str> = skipped.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        names,
        ["090/dirloop", "090/gone.jpg", "090/gone_dir", "091"]
    );
    assert!(skipped[0].1.contains("a loop"), "{skipped:?}");
    assert!(
        skipped[1].1.contains("broken symbolic link") && skipped[1].1.contains("nowhere.jpg"),
        "{skipped:?}"
    );
    assert!(skipped[3].1.contains("already read"), "{skipped:?}");
}

#[test]
fn a_link_to_itself_is_listed_not_followed() {
    let d = tempfile::tempdir().unwrap();
    touch(&d.path().join("a.jpg"));
    symlink("self", d.path().join("self")).unwrap();
    let w = walk(d.path()).unwrap();
    assert_eq!(w.files.len(), 1);
    assert_eq!(w.skipped.len(), 1);
    assert!(w.skipped[0].reason.contains("cannot be followed"), "{w:?}");
}

/// The real file system, but `denied` paths cannot be listed or opened.
struct Denied(Vec<PathBuf>);

impl Reader for Denied {
    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        if self.0.iter().any(|d| d == dir) {
            return Err(io::Error::from_raw_os_error(13));
        }
        RealFs.read_dir(dir)
    }

    fn open(&self, file: &Path) -> io::Result<()> {
        if self.0.iter().any(|d| d == file) {
            return Err(io::Error::from_raw_os_error(13));
        }
        RealFs.open(file)
    }
}

#[test]
fn unreadable_folders_and_files_are_skipped_with_the_system_reason() {
    let d = tempfile::tempdir().unwrap();
    for f in ["a/1.png", "a/locked/2.png", "b/3.png", "b/4.png"] {
        touch(&d.path().join(f));
    }
    let reader = Denied(vec![d.path().join("a/locked"), d.path().join("b/3.png")]);
    let w = walk_with(d.path(), &reader).unwrap();
    assert_eq!(relative(d.path(), &w.files), ["a/1.png", "b/4.png"]);
    let skipped = reasons(d.path(), &w);
    assert_eq!(skipped.len(), 2);
    assert_eq!(skipped[0].0, "a/locked");
    assert!(
        skipped[0].1.contains("cannot read the folder")
            && skipped[0].1.contains("ermission denied"),
        "{skipped:?}"
    );
    assert_eq!(skipped[1].0, "b/3.png");
    assert!(skipped[1].1.contains("ermission denied"), "{skipped:?}");

    // Only the folder itself being unreadable is an error, naming it.
    let err = walk_with(d.path(), &Denied(vec![d.path().to_path_buf()])).unwrap_err();
    let err = format!("{err:#}");
    assert!(
        err.contains(&d.path().display().to_string()) && err.contains("cannot read the folder"),
        "{err}"
    );
    let err = format!("{:#}", walk(&d.path().join("missing")).unwrap_err());
    assert!(err.contains("missing: cannot read the folder"), "{err}");
}

/// The same through real permissions; skipped where they do not stop reads (root, as in CI).
#[test]
fn a_chmod_000_folder_is_skipped() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    touch(&d.path().join("a/1.png"));
    touch(&d.path().join("locked/2.png"));
    let locked = d.path().join("locked");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let privileged = std::fs::read_dir(&locked).is_ok();
    let w = walk(d.path());
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    if privileged {
        eprintln!("skipped: permissions do not stop this user's reads (root)");
        return;
    }
    let w = w.unwrap();
    assert_eq!(relative(d.path(), &w.files), ["a/1.png"]);
    assert_eq!(w.skipped.len(), 1);
    assert!(w.skipped[0].reason.contains("ermission denied"), "{w:?}");
}
