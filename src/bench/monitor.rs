//! NVML readings through a cell: board power, SM utilisation, device memory, clocks and
//! temperature, sampled on a thread at a fixed rate. NVML is loaded at run time
//! (`nvml-wrapper`); where it is absent or refuses, the cell runs unmonitored and says why.

use super::plan::CellSpec;
use super::record::{MonitorSample, PowerSummary};
use crate::cuda::identity::nvml;
pub use crate::cuda::identity::NvmlGpu;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const MIB: f64 = 1024.0 * 1024.0;

/// The NVML device of `gpu`, or says in a line why it cannot be read.
fn open(gpu: &NvmlGpu) -> Result<nvml_wrapper::Device<'static>, String> {
    nvml()
        .map_err(|e| format!("NVML is not readable here ({e}); no power, utilisation or clocks"))?;
    gpu.device()
}

impl NvmlGpu {
    /// The GPU NVML should read for `cell`: the board it is pinned to, else the plan's CUDA
    /// device by its UUID (under a scheduler's `CUDA_VISIBLE_DEVICES`, CUDA device 0 may be
    /// any of NVML's), else NVML's device of that index.
    pub(crate) fn of_cell(cell: &CellSpec) -> NvmlGpu {
        if let Some(slot) = &cell.gpu {
            return NvmlGpu::Uuid(slot.uuid.clone());
        }
        let device_id = cell.settings.device_id;
        let info = crate::cuda::info::driver_info();
        let uuid = info.gpus.get(device_id).and_then(|g| g.uuid.clone());
        NvmlGpu::of_cuda_ordinal(device_id, uuid)
    }
}

/// Device memory in use on `gpu` now, MiB (`None` without NVML).
pub fn memory_used_mib(gpu: &NvmlGpu) -> Option<f64> {
    let device = open(gpu).ok()?;
    device.memory_info().ok().map(|m| m.used as f64 / MIB)
}

/// One reading of every field NVML answers on `device`.
fn read(device: &nvml_wrapper::Device, t_s: f64) -> MonitorSample {
    MonitorSample {
        t_s,
        power_w: device.power_usage().ok().map(|mw| mw as f64 / 1e3),
        sm_util_pct: device.utilization_rates().ok().map(|u| u.gpu as f64),
        memory_used_mib: device.memory_info().ok().map(|m| m.used as f64 / MIB),
        sm_clock_mhz: device.clock_info(Clock::SM).ok().map(f64::from),
        mem_clock_mhz: device.clock_info(Clock::Memory).ok().map(f64::from),
        temperature_c: device
            .temperature(TemperatureSensor::Gpu)
            .ok()
            .map(f64::from),
    }
}

/// A sampling thread and the measured phase it was told about.
pub struct Monitor {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<MonitorSample>>,
    origin: Instant,
    phase: Mutex<(Option<f64>, Option<f64>)>,
    rate_hz: f64,
}

impl Monitor {
    /// Starts sampling `gpu` at `rate_hz`; `Err` says why it cannot.
    pub fn start(gpu: &NvmlGpu, rate_hz: f64) -> Result<Monitor, String> {
        if !(rate_hz > 0.0 && rate_hz.is_finite()) {
            return Err("NVML sampling is off (rate 0)".into());
        }
        let device = open(gpu)?;
        let stop = Arc::new(AtomicBool::new(false));
        let origin = Instant::now();
        let period = Duration::from_secs_f64(1.0 / rate_hz);
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut samples = vec![];
            let mut next = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                samples.push(read(&device, origin.elapsed().as_secs_f64()));
                next += period;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
            samples
        });
        Ok(Monitor {
            stop,
            thread,
            origin,
            phase: Mutex::new((None, None)),
            rate_hz,
        })
    }

    /// Marks the start of the measured phase (the first mark counts).
    pub(crate) fn phase_start(&self) {
        let t = self.origin.elapsed().as_secs_f64();
        if let Ok(mut p) = self.phase.lock() {
            p.0.get_or_insert(t);
        }
    }

    /// Marks the end of the measured phase (the last mark counts).
    pub(crate) fn phase_end(&self) {
        let t = self.origin.elapsed().as_secs_f64();
        if let Ok(mut p) = self.phase.lock() {
            p.1 = Some(t);
        }
    }

    /// Stops sampling: every reading, and the measured phase's window (seconds since start).
    pub fn stop(self) -> (Vec<MonitorSample>, Option<(f64, f64)>, f64) {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.thread.join().unwrap_or_default();
        let window = match self.phase.into_inner().unwrap_or_default() {
            (Some(a), Some(b)) if b > a => Some((a, b)),
            _ => None,
        };
        (samples, window, self.rate_hz)
    }
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

fn max(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
}

/// Power and utilisation over the readings inside `window` (all of them without one), with
/// energy figures from the cell's throughput.
pub fn summarize(
    samples: &[MonitorSample],
    window: Option<(f64, f64)>,
    rate_hz: f64,
    samples_per_s: f64,
) -> PowerSummary {
    let inside: Vec<&MonitorSample> = samples
        .iter()
        .filter(|s| window.is_none_or(|(a, b)| s.t_s >= a && s.t_s <= b))
        .collect();
    let pick = |f: fn(&MonitorSample) -> Option<f64>| inside.iter().filter_map(move |s| f(s));
    let mean_w = mean(pick(|s| s.power_w));
    let per_watt = mean_w.filter(|w| *w > 0.0);
    PowerSummary {
        samples: inside.len(),
        rate_hz,
        mean_w,
        max_w: max(pick(|s| s.power_w)),
        energy_per_sample_j: per_watt
            .filter(|_| samples_per_s > 0.0)
            .map(|w| w / samples_per_s),
        samples_per_s_per_w: per_watt.map(|w| samples_per_s / w),
        sm_util_mean_pct: mean(pick(|s| s.sm_util_pct)),
        sm_clock_mean_mhz: mean(pick(|s| s.sm_clock_mhz)),
        mem_clock_mean_mhz: mean(pick(|s| s.mem_clock_mhz)),
        temperature_max_c: max(pick(|s| s.temperature_c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_s: f64, power_w: f64) -> MonitorSample {
        MonitorSample {
            t_s,
            power_w: Some(power_w),
            sm_util_pct: Some(50.0),
            memory_used_mib: Some(100.0),
            sm_clock_mhz: None,
            mem_clock_mhz: None,
            temperature_c: Some(40.0 + t_s),
        }
    }

    #[test]
    fn the_summary_covers_the_measured_window_only() {
        let s = [
            sample(0.0, 50.0),
            sample(1.0, 300.0),
            sample(2.0, 100.0),
            sample(3.0, 60.0),
        ];
        let p = summarize(&s, Some((0.5, 2.5)), 20.0, 1000.0);
        assert_eq!(p.samples, 2);
        assert_eq!(p.mean_w, Some(200.0));
        assert_eq!(p.max_w, Some(300.0));
        assert_eq!(p.energy_per_sample_j, Some(0.2));
        assert_eq!(p.samples_per_s_per_w, Some(5.0));
        assert_eq!(p.temperature_max_c, Some(42.0));
        assert_eq!(p.sm_clock_mean_mhz, None);
        let all = summarize(&s, None, 20.0, 0.0);
        assert_eq!(all.samples, 4);
        assert_eq!(all.energy_per_sample_j, None);
    }

    #[test]
    fn a_zero_rate_is_refused_with_a_reason() {
        let err = Monitor::start(&NvmlGpu::Index(0), 0.0).err().unwrap();
        assert!(err.contains("off"), "{err}");
    }
}
