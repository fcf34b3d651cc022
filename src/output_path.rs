//! Where trtkit may write a file it was told to write. Every file lands by renaming a new file
//! over its path (see `atomic_file`), which replaces whatever is there: so an existing path
//! that is not a regular file (a device such as `/dev/null`, a FIFO, a socket, a folder) is
//! refused, a symlink is followed to the file it names (which is written, the link kept), and an
//! output that is one of the command's own inputs is refused before any work is done.

use anyhow::{bail, Context, Result};
use std::fs::{FileType, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// What a file type is, in words, for one that is not a regular file.
fn kind(t: FileType) -> &'static str {
    if t.is_dir() {
        "a folder"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The path a write to `path` renames its new file onto: `path` itself, or, when `path` is a
/// symlink, the file it names (a dangling link names a file still to be made). An existing
/// path that is not a regular file, reached directly or through links, is refused.
pub(crate) fn write_target(path: &Path) -> Result<PathBuf> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(path.to_path_buf());
    };
    if meta.file_type().is_symlink() {
        return link_target(path);
    }
    refuse_special(path, &meta)?;
    Ok(path.to_path_buf())
}

/// Refuses `meta` of an existing `path` unless it is a regular file.
fn refuse_special(path: &Path, meta: &Metadata) -> Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    bail!(
        "{}: is {}, not a regular file; trtkit writes a new file in its place, so give the path of a file",
        path.display(),
        kind(meta.file_type())
    )
}

/// The file the symlink `path` leads to, refused unless it is a regular file or not there yet.
fn link_target(path: &Path) -> Result<PathBuf> {
    let mut target = path.to_path_buf();
    for _ in 0..40 {
        let meta = std::fs::symlink_metadata(&target);
        match meta {
            Ok(m) if m.file_type().is_symlink() => {
                let next = std::fs::read_link(&target)
                    .with_context(|| format!("{}: cannot read the link", target.display()))?;
                target = match target.parent() {
                    Some(dir) if next.is_relative() => dir.join(next),
                    _ => next,
                };
            }
            Ok(m) => {
                refuse_special(path, &m).with_context(|| {
                    format!("{} (a link to {})", path.display(), target.display())
                })?;
                return Ok(target);
            }
            Err(_) => return Ok(target),
        }
    }
    bail!("{}: too many levels of symbolic links", path.display())
}

/// (device, inode) of an existing file, following links.
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// A path named on the command line, and the flag (or argument) that named it.
pub(crate) type NamedPath<'a> = (&'a str, &'a Path);

/// Checks a command's outputs before it does any work: each must be writable in place
/// ([`write_target`]), none may be one of its `inputs` (the same file) or another output.
/// The error names both flags and the path; callers make it a usage error.
pub(crate) fn check_outputs(outputs: &[NamedPath], inputs: &[NamedPath]) -> Result<()> {
    for (i, (flag, path)) in outputs.iter().enumerate() {
        write_target(path).with_context(|| flag.to_string())?;
        let Some(id) = identity(path) else {
            check_same_new_path(outputs, i)?;
            continue;
        };
        if let Some((input_flag, _)) = inputs.iter().find(|(_, p)| identity(p) == Some(id)) {
            bail!(
                "{flag} {} is the same file as {input_flag}: the output would overwrite the input; write it elsewhere",
                path.display()
            );
        }
        if let Some((other, _)) = outputs[..i].iter().find(|(_, p)| identity(p) == Some(id)) {
            bail!(
                "{flag} and {other} both name {}: give each output its own file",
                path.display()
            );
        }
    }
    Ok(())
}

/// Refuses output `i` when an earlier output names the same file still to be made.
fn check_same_new_path(outputs: &[NamedPath], i: usize) -> Result<()> {
    let (flag, path) = outputs[i];
    let resolved = |p: &Path| -> Option<PathBuf> {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(dir.canonicalize().ok()?.join(p.file_name()?))
    };
    let Some(mine) = resolved(path) else {
        return Ok(());
    };
    if let Some((other, _)) = outputs[..i]
        .iter()
        .find(|(_, p)| resolved(p).as_ref() == Some(&mine))
    {
        bail!(
            "{flag} and {other} both name {}: give each output its own file",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_a_fifo_and_a_folder_are_refused_and_a_link_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_target(Path::new("/dev/null")).unwrap_err();
        assert!(
            format!("{err:#}").contains("/dev/null: is a character device"),
            "{err:#}"
        );
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(format!("{:#}", write_target(&fifo).unwrap_err()).contains("is a FIFO"));
        assert!(format!("{:#}", write_target(dir.path()).unwrap_err()).contains("is a folder"));
        let file = dir.path().join("real.npz");
        std::fs::write(&file, b"x").unwrap();
        let link = dir.path().join("link.npz");
        std::os::unix::fs::symlink("real.npz", &link).unwrap();
        assert_eq!(write_target(&link).unwrap(), dir.path().join("real.npz"));
        let to_device = dir.path().join("out");
        std::os::unix::fs::symlink("/dev/null", &to_device).unwrap();
        let err = format!("{:#}", write_target(&to_device).unwrap_err());
        assert!(
            err.contains("a link to /dev/null") && err.contains("character device"),
            "{err}"
        );
        let fresh = dir.path().join("new.npz");
        assert_eq!(write_target(&fresh).unwrap(), fresh);
    }

    #[test]
    fn an_output_onto_an_input_or_another_output_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.onnx");
        std::fs::write(&model, b"model").unwrap();
        let link = dir.path().join("alias.onnx");
        std::os::unix::fs::symlink(&model, &link).unwrap();
        let out = dir.path().join("out.onnx");
        let inputs = [("MODEL", model.as_path())];
        check_outputs(&[("-o", out.as_path())], &inputs).unwrap();
        for same in [&model, &link] {
            let err = check_outputs(&[("-o", same.as_path())], &inputs).unwrap_err();
            let text = format!("{err:#}");
            assert!(
                text.contains("-o") && text.contains("same file as MODEL"),
                "{text}"
            );
        }
        let err = check_outputs(
            &[
                ("--save-outputs", out.as_path()),
                ("--save-reference", out.as_path()),
            ],
            &inputs,
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("--save-reference and --save-outputs both name"));
    }
}
