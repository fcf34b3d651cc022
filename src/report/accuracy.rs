//! The accuracy report of `validate` (and of saved validate reports): top-1/top-5, throughput
//! and latency as a table, and the per-image predictions as CSV.

use crate::atomic_file::write_atomic_with;
use crate::jobs::validate::{Prediction, ValidateReport};
use crate::metrics::latency::BatchLatency;
use crate::report::format::csv_field;
use crate::report::table::{Align, Table};
use crate::units::bytes;
use anyhow::Result;
use std::path::Path;

/// Writes the per-image predictions as CSV: file, label, top-1 … top-5; atomically.
pub(crate) fn save_predictions(path: &Path, predictions: &[Prediction]) -> Result<()> {
    write_atomic_with(path, |w| {
        writeln!(w, "file,label,top1,top2,top3,top4,top5")?;
        for p in predictions {
            let mut cells: Vec<String> = p.top5.iter().map(|c| c.to_string()).collect();
            cells.resize(5, String::new());
            writeln!(
                w,
                "{},{},{}",
                csv_field(&p.file.display().to_string()),
                p.label,
                cells.join(",")
            )?;
        }
        Ok(())
    })
}

/// The wall time's split, in seconds: what bounds the run shows at once.
fn time_split(r: &ValidateReport) -> String {
    let s = &r.time_split;
    format!(
        "{:.2} s: set-up {:.2}, waiting for images {:.2}, H2D {:.2}, model {:.2}, D2H {:.2}, scoring {:.2}",
        r.wall_s, s.setup_s, s.wait_images_s, s.h2d_s, s.model_s, s.d2h_s, s.scoring_s
    )
}

/// The terminal (or markdown) rendering of a validation report.
pub fn render(r: &ValidateReport, markdown: bool) -> String {
    let mut t = Table::new(&["metric", "value"]).with_align(&[Align::Left, Align::Right]);
    let pct = |v: f64| format!("{:.2}%", v * 100.0);
    let ms = |s: &BatchLatency| {
        if s.batches == 0 {
            "n/a".to_string()
        } else {
            format!("{:.3} / {:.3} ms", s.mean_ms, s.max_ms)
        }
    };
    match (&r.segment, &r.detect) {
        (Some(m), _) => {
            let miou = m
                .miou
                .map(|v| format!("{v:.4}"))
                .unwrap_or_else(|| "-".into());
            t.row(vec!["mIoU".into(), miou]);
            t.row(vec!["pixel accuracy".into(), pct(m.pixel_accuracy)]);
            t.row(vec![
                "pixels (left out)".into(),
                format!("{} ({})", m.pixels, m.ignored),
            ]);
        }
        (_, Some(d)) => {
            t.row(vec![
                "mAP@0.5:0.95".into(),
                format!("{:.4}", d.map.map50_95),
            ]);
            t.row(vec!["mAP@0.5".into(), format!("{:.4}", d.map.map50)]);
            t.row(vec!["mAP@0.75".into(), format!("{:.4}", d.map.map75)]);
            t.row(vec![
                "boxes: truth / found".into(),
                format!("{} / {}", d.ground_truths, d.detections),
            ]);
            t.row(vec![
                "confidence, NMS IoU".into(),
                format!("{}, {}", d.conf, d.iou),
            ]);
        }
        _ => {
            t.row(vec!["top-1".into(), pct(r.top1)]);
            t.row(vec!["top-5".into(), pct(r.top5)]);
        }
    }
    t.row(vec!["images".into(), r.images.to_string()]);
    t.row(vec!["skipped".into(), r.skipped.to_string()]);
    t.row(vec![
        "images/s (after warm-up)".into(),
        format!("{:.1} ({:.1})", r.images_per_s, r.steady_images_per_s),
    ]);
    t.row(vec![
        "batches (warm-up)".into(),
        format!("{} ({}) of {}", r.batches, r.warmup_batches, r.batch_size),
    ]);
    t.row(vec!["latency-all mean / max".into(), ms(&r.latency_all)]);
    t.row(vec![
        "latency-model mean / max".into(),
        ms(&r.latency_model),
    ]);
    t.row(vec!["where the time went".into(), time_split(r)]);
    t.row(vec![
        "loader".into(),
        format!(
            "{:.1} images/s on {} threads",
            r.loader.images_per_s, r.loader.threads
        ),
    ]);
    if let Some(peak) = r.peak_rss_bytes {
        t.row(vec!["peak memory (RSS)".into(), bytes(peak)]);
    }
    let mut out = format!(
        "model    {}\nbackend  {} ({})\ndataset  {}\n\n",
        r.model, r.backend, r.data_path, r.dataset
    );
    out += &if markdown {
        t.render_markdown()
    } else {
        t.render()
    };
    if !r.skipped_images.is_empty() {
        out += &format!("\nskipped {} images:\n", r.skipped);
        for f in r.skipped_images.iter().take(20) {
            out += &format!("  {}: {}\n", f.path.display(), f.reason);
        }
        if r.skipped > 20 {
            out += &format!("  ... and {} more (--json lists all)\n", r.skipped - 20);
        }
    }
    out
}
