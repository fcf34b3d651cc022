//! How the tract backend spends the CPU's threads: a [`ThreadPlan`] cuts a fixed batch into
//! pieces run side by side on plain worker threads, each piece's matrix products on
//! tract-linalg's executor with the threads left over.

use crate::onnx::OnnxModel;
use anyhow::{Context, Result};

/// How the CPU threads are spent: the batch is cut into `chunks` pieces of `chunk_batch`
/// samples, `workers` of them run side by side, each with `intra` threads for its matrix
/// products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ThreadPlan {
    /// Pieces the batch is split into.
    pub chunks: usize,
    /// Samples per piece (the batch the plan is prepared for).
    pub(crate) chunk_batch: usize,
    /// Pieces run side by side.
    pub(crate) workers: usize,
    /// Threads inside each piece.
    pub(crate) intra: usize,
}

impl ThreadPlan {
    /// The split for `threads` threads and a batch of `batch` (`None`: not fixed, no split).
    ///
    /// With `per_sample` every piece is one sample, even on one thread: tract runs a
    /// convolution over a batch axis with an unfused im2col and transposes around its 1×1
    /// convolutions, so a convolutional network takes up to twice the time per sample at batch
    /// 2 that it takes at batch 1 (ResNet-50, `examples/tract_profile.rs`). Without it the
    /// batch is cut into one piece per thread.
    pub fn new(threads: usize, batch: Option<usize>, per_sample: bool) -> ThreadPlan {
        let threads = threads.max(1);
        match batch {
            Some(n) if n > 1 && (threads > 1 || per_sample) => {
                let chunk_batch = if per_sample {
                    1
                } else {
                    n.div_ceil(threads.min(n))
                };
                let chunks = n.div_ceil(chunk_batch);
                let workers = threads.min(chunks);
                ThreadPlan {
                    chunks,
                    chunk_batch,
                    workers,
                    intra: (threads / workers).max(1),
                }
            }
            _ => ThreadPlan {
                chunks: 1,
                chunk_batch: batch.unwrap_or(0),
                workers: 1,
                intra: threads,
            },
        }
    }

    /// Threads in use: the pieces side by side times the threads inside each.
    pub fn threads(&self) -> usize {
        self.workers * self.intra
    }
}

/// Whether tract runs `model` faster one sample at a time: any convolution says so (see
/// [`ThreadPlan::new`]).
pub(super) fn runs_per_sample(model: &OnnxModel) -> bool {
    model
        .graph()
        .node
        .iter()
        .any(|n| matches!(n.op_type.as_str(), "Conv" | "ConvTranspose"))
}

/// Runs `f` on every chunk on `workers` plain threads side by side (chunk `i` on thread
/// `i % workers`, in order), the results in chunk order. Plain threads, not a rayon pool: a
/// rayon worker that waits inside tract's own multithreaded executor steals other chunks and
/// re-enters the executor's thread-local scope, which panics ("RefCell already borrowed").
pub(super) fn on_workers<C: Sync, T: Send>(
    workers: usize,
    chunks: &[C],
    f: impl Fn(usize, &C) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let workers = workers.clamp(1, chunks.len().max(1));
    let mut done: Vec<Option<T>> = (0..chunks.len()).map(|_| None).collect();
    std::thread::scope(|s| -> Result<()> {
        let f = &f;
        let handles = (0..workers)
            .map(|w| {
                std::thread::Builder::new()
                    .name(format!("trtkit-tract-{w}"))
                    .spawn_scoped(s, move || {
                        (w..chunks.len())
                            .step_by(workers)
                            .map(|i| Ok((i, f(i, &chunks[i])?)))
                            .collect::<Result<Vec<_>>>()
                    })
            })
            .collect::<std::io::Result<Vec<_>>>()
            .context("cannot start the tract worker threads")?;
        for h in handles {
            let results = h
                .join()
                .map_err(|_| anyhow::anyhow!("a tract worker thread panicked"))??;
            for (i, r) in results {
                done[i] = Some(r);
            }
        }
        Ok(())
    })?;
    Ok(done.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convolutional_batches_run_one_sample_a_piece() {
        let conv = ThreadPlan::new(16, Some(32), true);
        assert_eq!(
            (conv.chunks, conv.chunk_batch, conv.workers, conv.intra),
            (32, 1, 16, 1)
        );
        let conv_one_thread = ThreadPlan::new(1, Some(8), true);
        assert_eq!(
            (conv_one_thread.chunks, conv_one_thread.workers),
            (8, 1),
            "one thread still runs a sample at a time"
        );
        let few = ThreadPlan::new(16, Some(4), true);
        assert_eq!((few.chunks, few.workers, few.intra), (4, 4, 4));
        let dense = ThreadPlan::new(16, Some(32), false);
        assert_eq!(
            (dense.chunks, dense.chunk_batch, dense.workers),
            (16, 2, 16)
        );
        let dense_one_thread = ThreadPlan::new(1, Some(32), false);
        assert_eq!(
            (dense_one_thread.chunks, dense_one_thread.chunk_batch),
            (1, 32)
        );
        assert_eq!(ThreadPlan::new(16, None, true).chunks, 1);
    }
}
