//! An `.npz` written batch by batch: each array's batches go to a spool file beside the
//! destination as they arrive, and the archive is put together from the spools at the end, so
//! no array is ever whole in memory. The archive is the one [`npz::save`](super::npz::save)
//! writes for the batches joined on their batch axes, and it lands atomically.

use super::npy;
use crate::atomic_file::write_atomic_seekable;
use crate::tensor::{ElemType, HostTensor};
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use zip::write::SimpleFileOptions;

/// One batch of an array: where its bytes start in the spool, and its shape.
struct Part {
    offset: u64,
    shape: Vec<usize>,
}

/// One array being spooled.
struct Spooled {
    name: String,
    elem: ElemType,
    /// Its batch axis; `None`: the array is the same in every batch and is kept once.
    axis: Option<usize>,
    /// The shape of the batches joined so far.
    shape: Vec<usize>,
    parts: Vec<Part>,
    file: File,
    written: u64,
}

/// An `.npz` archive being written batch by batch ([`NpzSpool::add`]), put in place by
/// [`NpzSpool::finish`]; dropped before that, it leaves nothing behind.
pub(crate) struct NpzSpool {
    path: PathBuf,
    arrays: Vec<Spooled>,
}

impl NpzSpool {
    /// An archive to be written to `path`, empty so far.
    pub fn new(path: &Path) -> NpzSpool {
        NpzSpool {
            path: path.to_path_buf(),
            arrays: vec![],
        }
    }

    /// The folder the spools and the archive go to (created if missing).
    fn folder(&self) -> Result<PathBuf> {
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
        Ok(dir)
    }

    /// Adds one batch: the same arrays, in the same order, as every other batch; `axis_of` gives
    /// each array's batch axis (`None`: it has none, and only the first batch's is kept).
    pub fn add(
        &mut self,
        tensors: &[HostTensor],
        axis_of: impl Fn(&HostTensor) -> Result<Option<usize>>,
    ) -> Result<()> {
        let what = || format!("{}: cannot write", self.path.display());
        if self.arrays.is_empty() {
            let dir = self.folder()?;
            for t in tensors {
                let file = tempfile::tempfile_in(&dir).with_context(what)?;
                self.arrays.push(Spooled {
                    name: t.name.clone(),
                    elem: t.elem_type(),
                    axis: axis_of(t)?,
                    shape: t.shape.clone(),
                    parts: vec![],
                    file,
                    written: 0,
                });
            }
        } else if self.arrays.len() != tensors.len() {
            bail!(
                "{}: a batch has {} arrays, the first had {}",
                self.path.display(),
                tensors.len(),
                self.arrays.len()
            );
        }
        for (array, t) in self.arrays.iter_mut().zip(tensors) {
            array.append(t).with_context(what)?;
        }
        Ok(())
    }

    /// Puts the archive together from the spools and writes it in place (atomically).
    pub fn finish(self) -> Result<()> {
        self.finish_with(&[])
    }

    /// [`NpzSpool::finish`], with `extra` arrays after the spooled ones, whole.
    pub(crate) fn finish_with(self, extra: &[HostTensor]) -> Result<()> {
        let NpzSpool { path, arrays } = self;
        write_atomic_seekable(&path, |file| {
            let mut zip = zip::ZipWriter::new(file);
            for array in &arrays {
                let header = npy::header(array.elem, &array.shape);
                let bytes = header.len() as u64 + array.written;
                let options = SimpleFileOptions::default()
                    .compression_method(zip::CompressionMethod::Stored)
                    .large_file(bytes >= u64::from(u32::MAX));
                zip.start_file(format!("{}.npy", array.name), options)?;
                zip.write_all(&header)?;
                array.copy_joined(&mut zip)?;
            }
            for t in extra {
                let options =
                    SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
                zip.start_file(format!("{}.npy", t.name), options)?;
                zip.write_all(&npy::encode(t))?;
            }
            zip.finish()?;
            Ok(())
        })
    }
}

impl Spooled {
    /// Appends one batch of this array to its spool.
    fn append(&mut self, t: &HostTensor) -> Result<()> {
        if t.name != self.name || t.elem_type() != self.elem {
            bail!(
                "array '{}' ({}) of a batch does not match '{}' ({}) of the first",
                t.name,
                t.elem_type(),
                self.name,
                self.elem
            );
        }
        let Some(axis) = self.axis else {
            if self.parts.is_empty() {
                self.write_part(t)?;
            }
            return Ok(());
        };
        let others = |s: &[usize]| {
            let mut s = s.to_vec();
            if axis < s.len() {
                s.remove(axis);
            }
            s
        };
        if axis >= t.shape.len()
            || t.shape.len() != self.shape.len()
            || others(&t.shape) != others(&self.shape)
        {
            bail!(
                "array '{}': cannot join shape {:?} to {:?} on axis {axis}",
                self.name,
                t.shape,
                self.shape
            );
        }
        if !self.parts.is_empty() {
            self.shape[axis] += t.shape[axis];
        }
        self.write_part(t)
    }

    fn write_part(&mut self, t: &HostTensor) -> Result<()> {
        let bytes = t.to_le_bytes();
        self.file.write_all(&bytes)?;
        self.parts.push(Part {
            offset: self.written,
            shape: t.shape.clone(),
        });
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Writes the batches joined on the batch axis: in spool order when that is the first axis
    /// (or there is one batch), else a slab of every batch in turn for each index of the axes
    /// before it.
    fn copy_joined(&self, out: &mut dyn Write) -> Result<()> {
        let mut file = &self.file;
        let axis = self.axis.unwrap_or(0);
        if axis == 0 || self.parts.len() < 2 {
            file.seek(SeekFrom::Start(0))?;
            std::io::copy(&mut file.take(self.written), out)?;
            return Ok(());
        }
        let outer: usize = self.shape[..axis].iter().product();
        let slab = |p: &Part| p.shape[axis..].iter().product::<usize>() * self.elem.size();
        let mut buf = vec![];
        for o in 0..outer {
            for part in &self.parts {
                let len = slab(part);
                buf.resize(len, 0);
                self.file
                    .read_exact_at(&mut buf, part.offset + (o * len) as u64)?;
                out.write_all(&buf)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::batch_axis::concat_on;
    use crate::data::npz;
    use crate::tensor::TensorData;

    fn t(name: &str, shape: Vec<usize>, first: f32) -> HostTensor {
        let n = shape.iter().product();
        let values = (0..n).map(|i| first + i as f32).collect();
        HostTensor::new(name, shape, TensorData::F32(values)).unwrap()
    }

    #[test]
    fn batches_spooled_read_back_as_the_arrays_joined_on_their_axes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.npz");
        let batches = [
            vec![
                t("logits", vec![2, 3], 0.0),
                t("state", vec![2, 2, 4], 100.0),
                t("scale", vec![3], 7.0),
            ],
            vec![
                t("logits", vec![1, 3], 50.0),
                t("state", vec![2, 1, 4], 200.0),
                t("scale", vec![3], 9.0),
            ],
        ];
        let axis = |t: &HostTensor| {
            Ok(match t.name.as_str() {
                "state" => Some(1),
                "scale" => None,
                _ => Some(0),
            })
        };
        let mut spool = NpzSpool::new(&path);
        for b in &batches {
            spool.add(b, axis).unwrap();
        }
        assert!(!path.exists(), "nothing in place before finish");
        spool.finish().unwrap();
        let back = npz::load(&path).unwrap();
        let column = |i: usize| batches.iter().map(|b| b[i].clone()).collect::<Vec<_>>();
        assert_eq!(back[0], concat_on(column(0), Some(0)).unwrap());
        assert_eq!(back[1], concat_on(column(1), Some(1)).unwrap());
        assert_eq!(back[1].shape, [2, 3, 4]);
        assert_eq!(
            back[2], batches[0][2],
            "an array with no batch axis is kept once"
        );
        // Only the archive is left in the folder: the spools were anonymous.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_batch_that_does_not_match_the_first_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.npz");
        let mut spool = NpzSpool::new(&path);
        spool
            .add(&[t("y", vec![2, 3], 0.0)], |_| Ok(Some(0)))
            .unwrap();
        let err = spool
            .add(&[t("y", vec![2, 4], 0.0)], |_| Ok(Some(0)))
            .unwrap_err();
        assert!(format!("{err:#}").contains("cannot join shape [2, 4] to [2, 3]"));
        let err = spool.add(&[], |_| Ok(Some(0))).unwrap_err();
        assert!(err
            .to_string()
            .contains("a batch has 0 arrays, the first had 1"));
        drop(spool);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
