//! A source's outputs kept on disk window by window, so that the next source can run with only
//! its own session in memory and be compared window by window with them. The spool is an
//! unnamed file in the system's temporary folder (`TMPDIR`), gone when it is dropped.

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

/// The outputs of every window of one source, in window order.
pub(crate) struct WindowSpool {
    file: File,
    windows: Vec<Vec<Entry>>,
    written: u64,
}

impl WindowSpool {
    /// An empty spool.
    pub fn new() -> Result<WindowSpool> {
        let file = tempfile::tempfile().context(
            "cannot create a temporary file for the outputs of a comparison (set TMPDIR to a folder with room)",
        )?;
        Ok(WindowSpool {
            file,
            windows: vec![],
            written: 0,
        })
    }

    /// Appends the next window's tensors.
    pub fn push(&mut self, tensors: &[HostTensor]) -> Result<()> {
        let mut entries = Vec::with_capacity(tensors.len());
        for t in tensors {
            let bytes = t.to_le_bytes();
            self.file
                .write_all(&bytes)
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
        self.windows.push(entries);
        Ok(())
    }

    /// The tensors of window `i`, as they were pushed.
    pub fn window(&self, i: usize) -> Result<Vec<HostTensor>> {
        let entries = self
            .windows
            .get(i)
            .with_context(|| format!("window {i} was never spooled"))?;
        entries
            .iter()
            .map(|e| {
                let mut bytes = vec![0; e.len];
                self.file
                    .read_exact_at(&mut bytes, e.offset)
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
    fn windows_read_back_as_pushed() {
        let mut spool = WindowSpool::new().unwrap();
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
