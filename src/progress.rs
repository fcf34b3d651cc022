//! How a long job tells its caller how far it got, without knowing about terminals: the command
//! line draws a bar, a script or a test passes [`NoProgress`]. Every job reports through this one
//! trait: measurements, calibration over batches, and TensorRT's builder phases.

/// Receives the progress of a job.
pub trait Progress: Send + Sync {
    /// A phase starts: `what` is being done over `total` units (samples, images, iterations;
    /// `None` when the amount is a duration).
    fn start(&self, what: &str, total: Option<u64>);
    /// `n` more units are done.
    fn advance(&self, n: u64);
    /// A short status to show beside the bar (a running accuracy, say).
    fn status(&self, text: String);
    /// The phase is over.
    fn finish(&self);
}

/// Shows nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: &str, _: Option<u64>) {}
    fn advance(&self, _: u64) {}
    fn status(&self, _: String) {}
    fn finish(&self) {}
}
