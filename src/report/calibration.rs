//! The report of `calibrate` (and the calibration part of `build`'s): which caches were reused or
//! calibrated and why, where the time went, and with `verbose` every tensor's range.

use crate::calibration::cache::PREPROCESSING;
use crate::calibration::collect::TensorRange;
use crate::calibration::request::CalibrateReport;
use crate::report::table::{Align, Table};

/// The terminal rendering: [`cache_lines`], the timing lines, and with `verbose` one range table
/// per calibrated (not reused) cache.
pub fn render(report: &CalibrateReport, verbose: bool) -> String {
    let mut out = String::new();
    for line in cache_lines(report) {
        out += &format!("{line}\n");
    }
    if let (Some(tm), Some(backend)) = (&report.timing, &report.backend) {
        out += &format!(
            "time on {backend}: model with histograms {:.2} s ({:.2} s of histogram thread-time inside), search {:.3} s, total {:.2} s\n",
            tm.model_s, tm.histogram_cpu_s, tm.search_s, tm.total_s
        );
        if let (Some(p), Some(o)) = (tm.plain_wall_s, tm.overhead_percent) {
            out +=
                &format!("plain model over the same batches: {p:.2} s; calibration adds {o:.1}%\n");
        }
    }
    if verbose {
        for c in report.caches.iter().filter(|c| !c.reused) {
            out += &format!("\n{}:\n", c.algorithm);
            out += &ranges_table(&c.tensors).render();
        }
    }
    out
}

/// The preprocessing applied and any warning about it, then one line per cache: reused (and
/// why it could be), or calibrated (and why it was).
pub(crate) fn cache_lines(report: &CalibrateReport) -> Vec<String> {
    let mut lines = vec![format!("calibration inputs: {}", report.preprocessing)];
    if report.samples_left_out > 0 {
        lines.push(format!(
            "left out: {} more samples of the source, past the sample limit (--num-samples)",
            report.samples_left_out
        ));
    }
    lines.extend(report.warnings.iter().map(|w| format!("warning: {w}")));
    for c in &report.caches {
        let k = &c.key;
        if c.reused {
            lines.push(format!(
                "reusing {} ({} tensors): its key matches (model {}, {} images, {}, batch {})",
                c.cache,
                c.tensors.len(),
                k.model_hash8(),
                k.image_count,
                k.algorithm,
                k.batch_size
            ));
            continue;
        }
        for why in &c.recalibrated_because {
            lines.push(format!("recalibrating: {}", name_the_flag(why)));
        }
        lines.push(format!(
            "calibrated {} tensors of {} over {} images at batch {} ({}) → {}",
            c.tensors.len(),
            report.model,
            k.image_count,
            k.batch_size,
            k.algorithm,
            c.cache
        ));
    }
    lines
}

/// A key difference with the preprocessing setting it names turned into its flag:
/// `preprocessing.mean was …, now …` becomes `--mean changed: was …, now …`.
fn name_the_flag(why: &str) -> String {
    let named = why
        .strip_prefix(PREPROCESSING)
        .and_then(|rest| rest.strip_prefix('.'))
        .and_then(|rest| rest.split_once(" was "))
        .map(|(setting, rest)| (setting, format!("was {rest}")));
    match named {
        Some((setting, change)) => {
            format!("--{} changed: {change}", setting.replace('_', "-"))
        }
        None => why.to_string(),
    }
}

/// Every tensor's range: amax, scale, largest |x| seen and how many values were counted.
fn ranges_table(ranges: &[TensorRange]) -> Table {
    let mut table = Table::new(&["tensor", "amax", "scale", "max |x|", "values"]).with_align(&[
        Align::Left,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
    ]);
    for r in ranges {
        table.row(vec![
            r.tensor.clone(),
            format!("{:.5}", r.amax),
            format!("{:.6e}", r.scale),
            format!("{:.5}", r.max_abs),
            r.count.to_string(),
        ]);
    }
    table
}
