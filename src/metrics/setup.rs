//! Set-up time: where the time before the first measured iteration of a batch went (opening the
//! backend, the harness's preparation, the first inference), reported apart from the measured
//! figures.

use serde::{Deserialize, Serialize};

/// The set-up of one measured batch, milliseconds; none of it is in any latency or throughput
/// figure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SetupTimes {
    /// Opening the backend for this batch: reading the model, creating its sessions or reading
    /// the engine, loading the libraries it needs (and, the first time a GPU backend runs, the
    /// GPU's CUDA context). 0 for a batch that reuses an engine opened for an earlier batch.
    pub open_ms: f64,
    /// The harness's preparation (GPU backends): preparing the backend for the batch and its
    /// streams, allocating and filling every buffer, the first runs of the other streams and
    /// any CUDA graph capture. `None` where no harness runs (backends timed on the wall clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) prepare_ms: Option<f64>,
    /// The first inference, run on its own before the warm-up (library set-up such as cuDNN's
    /// algorithm search or TensorRT-RTX's kernel compilation happens there).
    pub first_iteration_ms: f64,
    /// The sum of the three.
    pub total_ms: f64,
}

impl SetupTimes {
    /// The set-up of these parts, with their total.
    pub fn new(open_ms: f64, prepare_ms: Option<f64>, first_iteration_ms: f64) -> Self {
        SetupTimes {
            open_ms,
            prepare_ms,
            first_iteration_ms,
            total_ms: open_ms + prepare_ms.unwrap_or(0.0) + first_iteration_ms,
        }
    }

    /// The same parts with `open_ms` as the time to open the backend.
    pub(crate) fn with_open(self, open_ms: f64) -> Self {
        SetupTimes::new(open_ms, self.prepare_ms, self.first_iteration_ms)
    }

    /// The total in seconds.
    pub fn total_s(&self) -> f64 {
        self.total_ms / 1e3
    }

    /// `set-up 5.92 s (open 1.10 s, prepare 0.20 s, first inference 4.62 s) — not in the
    /// figures`: how reports say it in one line (no `prepare` without a harness).
    pub fn line(&self) -> String {
        let mut parts = vec![format!("open {}", duration(self.open_ms))];
        if let Some(p) = self.prepare_ms {
            parts.push(format!("prepare {}", duration(p)));
        }
        parts.push(format!(
            "first inference {}",
            duration(self.first_iteration_ms)
        ));
        format!(
            "set-up {} ({}) — not in the figures",
            duration(self.total_ms),
            parts.join(", ")
        )
    }
}

/// Milliseconds as people read a set-up step: `5.92 s` from a second up, `12.3 ms` below.
pub fn duration(ms: f64) -> String {
    if ms >= 995.0 {
        format!("{:.2} s", ms / 1e3)
    } else {
        format!("{ms:.1} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_is_the_sum_and_the_line_names_every_part() {
        let s = SetupTimes::new(1100.0, Some(200.0), 4620.0);
        assert!((s.total_ms - 5920.0).abs() < 1e-9);
        assert_eq!(
            s.line(),
            "set-up 5.92 s (open 1.10 s, prepare 200.0 ms, first inference 4.62 s) — not in the figures"
        );
        let wall = SetupTimes::new(0.0, None, 3.3).with_open(40.0);
        assert!((wall.total_ms - 43.3).abs() < 1e-9);
        assert_eq!(
            wall.line(),
            "set-up 43.3 ms (open 40.0 ms, first inference 3.3 ms) — not in the figures"
        );
    }

    #[test]
    fn json_names_each_part_and_leaves_prepare_out_without_a_harness() {
        let s = SetupTimes::new(1.0, None, 2.0);
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(
            text,
            r#"{"open_ms":1.0,"first_iteration_ms":2.0,"total_ms":3.0}"#
        );
        let back: SetupTimes = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
        let gpu = SetupTimes::new(1.0, Some(0.5), 2.0);
        let back: SetupTimes = serde_json::from_str(&serde_json::to_string(&gpu).unwrap()).unwrap();
        assert_eq!(back, gpu);
    }
}
