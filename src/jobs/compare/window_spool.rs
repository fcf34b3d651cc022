//! A source's outputs kept window by window, so that the next source can run with only its own
//! session in memory and be compared window by window with them: in memory up to a few MiB (a
//! small comparison writes no file at all), then in an unnamed file in the system's temporary
//! folder (`TMPDIR`), gone when it is dropped.

use crate::tensor::{ElemType, HostTensor};
use anyhow::{Context, Result};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

/// Where one tensor of one window lies in the spool.
struct Entry {
    name: String,
    elem: ElemType,
    shape: Vec<usize>,
    offset: u64,
    len: usize,
}

/// The most bytes of outputs a spool keeps in memory before it moves to a file.
const IN_MEMORY_BYTES: usize = 8 << 20;

/// One window's tensors: in memory, or where they lie in the file.
enum Kept {
    Memory(Vec<HostTensor>),
    File(Vec<Entry>),
}

/// The outputs of every window of one source, in window order.
pub(crate) struct WindowSpool {
    windows: Vec<Kept>,
    in_memory: usize,
    file: Option<File>,
    written: u64,
}

impl WindowSpool {
    /// An empty spool.
    pub fn new() -> WindowSpool {
        WindowSpool {
            windows: vec![],
            in_memory: 0,
            file: None,
            written: 0,
        }
    }

    /// Appends the next window's tensors.
    pub fn push(&mut self, tensors: &[HostTensor]) -> Result<()> {
        let bytes: usize = tensors.iter().map(HostTensor::byte_len).sum();
        if self.file.is_none() && self.in_memory + bytes <= IN_MEMORY_BYTES {
            self.in_memory += bytes;
            self.windows.push(Kept::Memory(tensors.to_vec()));
            return Ok(());
        }
        if self.file.is_none() {
            self.file = Some(tempfile::tempfile().context(
                "cannot create a temporary file for the outputs of a comparison (set TMPDIR to a folder with room)",
            )?);
        }
        let file = self.file.as_mut().expect("the spool file was just made");
        let mut entries = Vec::with_capacity(tensors.len());
        for t in tensors {
            let bytes = t.to_le_bytes();
            file.write_all(&bytes)
                .context("cannot spool a comparison's outputs to the temporary folder")?;
            entries.push(Entry {
                name: t.name.clone(),
                elem: t.elem_type(),
                shape: t.shape.clone(),
                offset: self.written,
                len: bytes.len(),
            });
            self.written += bytes.len() as u64;
        }
        self.windows.push(Kept::File(entries));
        Ok(())
    }

    /// The tensors of window `i`, as they were pushed.
    pub fn window(&self, i: usize) -> Result<Vec<HostTensor>> {
        let kept = self
            .windows
            .get(i)
            .with_context(|| format!("window {i} was never spooled"))?;
        let (entries, file) = match (kept, &self.file) {
            (Kept::Memory(tensors), _) => return Ok(tensors.clone()),
            (Kept::File(entries), Some(file)) => (entries, file),
            (Kept::File(_), None) => anyhow::bail!("window {i} is in a spool file never made"),
        };
        entries
            .iter()
            .map(|e| {
                let mut bytes = vec![0; e.len];
                file.read_exact_at(&mut bytes, e.offset)
                    .context("cannot read a comparison's spooled outputs back")?;
                HostTensor::from_le_bytes(e.name.clone(), e.shape.clone(), e.elem, &bytes)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorData;

    #[test]
    fn windows_read_back_as_pushed_from_memory_and_from_the_file() {
        let big = |first: f32| {
            let n = (IN_MEMORY_BYTES / 4 / 2) + 1;
            let values = (0..n).map(|i| first + i as f32).collect();
            vec![HostTensor::new("y", vec![n], TensorData::F32(values)).unwrap()]
        };
        let mut spool = WindowSpool::new();
        let windows = [big(0.0), big(1.0), big(2.0)];
        for w in &windows {
            spool.push(w).unwrap();
        }
        assert!(spool.file.is_some(), "the third window went to a file");
        assert!(matches!(spool.windows[0], Kept::Memory(_)));
        assert!(matches!(spool.windows[2], Kept::File(_)));
        for (i, w) in windows.iter().enumerate() {
            assert_eq!(&spool.window(i).unwrap(), w);
        }
    }

    #[test]
    fn windows_read_back_as_pushed() {
        let mut spool = WindowSpool::new();
        let w0 = vec![
            HostTensor::new("y", vec![2, 2], TensorData::F32(vec![1.0, 2.0, 3.0, 4.0])).unwrap(),
            HostTensor::new("ids", vec![2], TensorData::I64(vec![7, 8])).unwrap(),
        ];
        let w1 = vec![
            HostTensor::new("y", vec![1, 2], TensorData::F32(vec![5.0, 6.0])).unwrap(),
            HostTensor::new("ids", vec![1], TensorData::I64(vec![9])).unwrap(),
        ];
        spool.push(&w0).unwrap();
        spool.push(&w1).unwrap();
        assert_eq!(spool.window(1).unwrap(), w1);
        assert_eq!(spool.window(0).unwrap(), w0);
        assert!(spool.window(2).is_err());
    }
}
