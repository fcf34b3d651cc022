//! The tables users publish for one model at every precision: `validate`'s (latency-all and
//! latency-model mean / max, size, Prec@1, Prec@5, layers, parameters; one table per batch size)
//! and `compare`'s (equality per precision, and the top-10 table: one row per rank, one
//! `MAE / Disg %` column per precision), for the terminal or as markdown.

use crate::jobs::precision_compare::CompareAllReport;
use crate::jobs::precision_table::{RowAccuracy, ValidateAllReport};
use crate::metrics::task::TaskComparison;
use crate::report::table::Table;
use crate::report::task::{pct, precision_table, task_line};

fn render_table(t: &Table, markdown: bool) -> String {
    if markdown {
        t.render_markdown()
    } else {
        t.render()
    }
}

fn notes(out: &mut String, skipped: &[String], details: &[(String, String)]) {
    for (file, why) in details {
        // reads words, not a kind: only whether the reason names the file already, to say it once.
        if why.contains(file.as_str()) {
            *out += &format!("{why}\n");
        } else {
            *out += &format!("{file}: {why}\n");
        }
    }
    for s in skipped {
        *out += &format!("not run: {s}\n");
    }
}

/// The two accuracy cells of a row: mIoU and pixel accuracy, mAP@0.5:0.95 and mAP@0.5, or
/// top-1 and top-5.
fn accuracy_cells(a: &RowAccuracy) -> (String, String) {
    match (a.segment, a.detect) {
        (Some((miou, pixels)), _) => (
            miou.map(|v| format!("{v:.4}"))
                .unwrap_or_else(|| "-".into()),
            format!("{:.2}%", pixels * 100.0),
        ),
        (_, Some((map, map50))) => (format!("{map:.4}"), format!("{map50:.4}")),
        _ => (
            format!("{:.2}%", a.top1 * 100.0),
            format!("{:.2}%", a.top5 * 100.0),
        ),
    }
}

/// `validate`'s tables, one per batch size; markdown is the tables alone, ready to paste.
pub(crate) fn render_validate(r: &ValidateAllReport, markdown: bool) -> String {
    let mut out = if markdown {
        String::new()
    } else {
        format!("model    {}\ndataset  {}\n", r.model, r.dataset)
    };
    let mut details = vec![];
    for table in &r.tables {
        let first = table.rows.iter().find_map(|row| row.accuracy.as_ref());
        let (acc1, acc2) = match first.map(|a| (a.segment.is_some(), a.detect.is_some())) {
            Some((true, _)) => ("mIoU", "Pixel acc"),
            Some((_, true)) => ("mAP@.5:.95", "mAP@.5"),
            _ => ("Prec@1", "Prec@5"),
        };
        let mut t = Table::new(&[
            "Model",
            "Latency-all (ms) mean / max",
            "Latency-model (ms) mean / max",
            "size (MB)",
            acc1,
            acc2,
            "# layers",
            "# parameters",
        ]);
        for row in &table.rows {
            let count = |v: Option<u64>| v.map(|n| n.to_string()).unwrap_or_else(|| "-".into());
            let size = format!("{:.2}", row.size_bytes as f64 / 1e6);
            let label = row.source.shown();
            let cells = match (&row.accuracy, &row.source.unavailable) {
                (Some(a), _) => vec![
                    format!("{:.3} / {:.3}", a.latency_all.mean_ms, a.latency_all.max_ms),
                    format!(
                        "{:.3} / {:.3}",
                        a.latency_model.mean_ms, a.latency_model.max_ms
                    ),
                    size,
                    accuracy_cells(a).0,
                    accuracy_cells(a).1,
                ],
                (None, why) => {
                    let why = why.clone().unwrap_or_default();
                    if let Some(d) = &row.source.detail {
                        if !details.iter().any(|(_, x)| x == d) {
                            details.push((row.source.file.clone(), d.clone()));
                        }
                    }
                    vec![
                        format!("not run: {why}"),
                        "-".into(),
                        size,
                        "-".into(),
                        "-".into(),
                    ]
                }
            };
            let mut all = vec![label];
            all.extend(cells);
            all.push(count(row.layers.map(|n| n as u64)));
            all.push(count(row.parameters));
            t.row(all);
        }
        out += &if markdown {
            format!("\n**batch size {}**\n\n", table.batch)
        } else {
            format!("\nbatch size {}\n", table.batch)
        };
        out += &render_table(&t, markdown);
    }
    if !markdown {
        out += "\n";
        notes(&mut out, &r.skipped, &details);
    }
    out
}

/// `compare`'s two tables: closeness per precision, then the top-10 ranks; markdown is the
/// tables alone, ready to paste.
pub(crate) fn render_compare(r: &CompareAllReport, markdown: bool) -> String {
    let mut out = if markdown {
        String::new()
    } else {
        format!(
            "reference  {} ({})\ninputs     {}\nisclose    |A - B| <= {} + {} * |B|, output '{}'\n\n",
            r.reference, r.reference_backend, r.inputs, r.tolerance.atol, r.tolerance.rtol, r.output
        )
    };
    let mut t = Table::new(&[
        "Precision",
        "equal %",
        "all-close samples %",
        "max abs err",
        "mean abs err",
        "top-1 agree %",
        "NaN %",
    ]);
    let sci = |v: Option<f64>| v.map(|x| format!("{x:.3e}")).unwrap_or_else(|| "-".into());
    let mut details = vec![];
    for row in &r.rows {
        let label = row.source.shown();
        match &row.source.unavailable {
            Some(why) => {
                if let Some(d) = &row.source.detail {
                    details.push((row.source.file.clone(), d.clone()));
                }
                t.row(vec![
                    label,
                    format!("not run: {why}"),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ]);
            }
            None => t.row(vec![
                label,
                pct(row.equal_pct),
                pct(row.all_close_samples_pct),
                sci(row.max_abs_err),
                sci(row.mean_abs_err),
                pct(row.top1_agreement_pct),
                pct(row.nan_pct),
            ]),
        }
    }
    out += &render_table(&t, markdown);
    let ranked: Vec<_> = r.rows.iter().filter(|row| !row.ranks.is_empty()).collect();
    if !ranked.is_empty() {
        let headers: Vec<String> = std::iter::once("Rank".to_string())
            .chain(
                ranked
                    .iter()
                    .map(|row| format!("{} MAE / Disg %", row.source.label)),
            )
            .collect();
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut k = Table::new(&refs);
        let ranks = ranked.iter().map(|row| row.ranks.len()).max().unwrap_or(0);
        for i in 0..ranks {
            let mut cells = vec![(i + 1).to_string()];
            for row in &ranked {
                cells.push(
                    row.ranks
                        .get(i)
                        .map(|rank| format!("{:.3e} / {:.2}", rank.mae, rank.disagreement_pct))
                        .unwrap_or_else(|| "-".into()),
                );
            }
            k.row(cells);
        }
        out += "\n";
        out += &render_table(&k, markdown);
    }
    let tasks: Vec<(String, &TaskComparison)> = r
        .rows
        .iter()
        .filter_map(|row| row.task.as_ref().map(|t| (row.source.shown(), t)))
        .collect();
    if let Some(table) = precision_table(&tasks) {
        out += &format!("\n{}\n\n", task_line(tasks[0].1));
        out += &render_table(&table, markdown);
    }
    if !markdown {
        out += "\n";
        notes(&mut out, &r.skipped, &details);
    }
    out
}
