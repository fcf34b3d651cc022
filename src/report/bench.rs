//! The tables of `trtkit report`, made from a bench journal alone: one table per metric and
//! model (rows target × precision, columns batch size, and the swept axes' sizes where a plan
//! sweeps one; a failed cell says why in a word or two),
//! for the terminal, markdown, CSV (one row per cell) and JSON. [`super::html`] renders the same
//! tables as a page.

use crate::backend::select::Runtime;
use crate::bench::journal::Journal;
use crate::bench::key::Point;
use crate::bench::record::{CellRecord, Status};
use crate::report::bench_metrics::{Metric, METRICS};
use crate::report::format::{csv_field, num};
use crate::report::table::{Align, Table};
use crate::tensor::Precision;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// What `report` read: the journal files, the lines it skipped and the last record of each cell
/// (sorted by model, target, precision, batch and swept sizes). This is the JSON report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JournalReport {
    /// The journal files read.
    pub files: Vec<PathBuf>,
    /// Lines that were not records, as `file:line: why`.
    pub skipped: Vec<String>,
    /// Cells that measured.
    pub ok: usize,
    /// Cells that failed.
    pub failed: usize,
    /// The last record of each cell.
    pub cells: Vec<CellRecord>,
}

impl JournalReport {
    /// The report of a journal (one file or several merged).
    pub fn new(journal: &Journal) -> Self {
        let mut cells: Vec<CellRecord> = journal.latest().into_iter().cloned().collect();
        cells.sort_by(|a, b| position(a).cmp(&position(b)));
        let ok = cells.iter().filter(|r| r.status == Status::Ok).count();
        JournalReport {
            files: journal.files.clone(),
            skipped: journal.skipped.clone(),
            ok,
            failed: cells.len() - ok,
            cells,
        }
    }
}

/// Where a record sits in the tables.
fn position(r: &CellRecord) -> (&str, usize, Precision, Point) {
    (&r.model, target_rank(r.target()), r.precision(), r.point())
}

/// A target's place in [`Runtime::ALL`], the order tables and plots list them.
pub(crate) fn target_rank(t: Runtime) -> usize {
    Runtime::ALL
        .iter()
        .position(|x| *x == t)
        .unwrap_or(Runtime::ALL.len())
}

/// One table position.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Cell {
    /// No record (not run yet), or a record without this metric.
    Empty,
    /// The measured value.
    Ok {
        /// The value.
        value: f64,
    },
    /// The cell failed.
    Failed {
        /// [`crate::bench::record::FailureKind::short`].
        short: String,
        /// The one-line reason.
        reason: String,
    },
}

impl Cell {
    /// What a table shows for it.
    pub fn text(&self) -> String {
        match self {
            Cell::Empty => "–".into(),
            Cell::Ok { value } => num(*value),
            Cell::Failed { short, .. } => short.clone(),
        }
    }
}

/// One row: a target at a precision.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The target.
    pub target: Runtime,
    /// The precision.
    pub precision: Precision,
    /// One cell per column of the model.
    pub cells: Vec<Cell>,
}

/// One metric of one model.
#[derive(Clone, Debug, Serialize)]
pub struct MetricTable {
    /// [`Metric::title`].
    pub title: &'static str,
    /// The rows.
    pub rows: Vec<Row>,
}

/// The tables of one model.
#[derive(Clone, Debug, Serialize)]
pub struct ModelTables {
    /// The model's name.
    pub model: String,
    /// The columns, ascending: each batch size, at each size of the swept axes.
    pub columns: Vec<Point>,
    /// One table per metric some cell of the model measured.
    pub tables: Vec<MetricTable>,
}

/// A failed cell, for the list under the tables.
#[derive(Clone, Debug, Serialize)]
pub struct FailureLine {
    /// The cell's id.
    pub id: String,
    /// `model target precision batch N` (and `seq 128` for a swept axis).
    pub cell: String,
    /// The kind, in a word or two.
    pub short: String,
    /// The one-line reason.
    pub reason: String,
}

/// Every table of a report, and the failures list.
#[derive(Clone, Debug, Serialize)]
pub struct BenchTables {
    /// One section per model, in name order.
    pub models: Vec<ModelTables>,
    /// Every failed cell.
    pub failures: Vec<FailureLine>,
}

/// `model target precision batch N` (and `seq 128` for a swept axis).
pub(crate) fn cell_name(r: &CellRecord) -> String {
    format!(
        "{} {} {} {}",
        r.model,
        r.target(),
        r.precision(),
        r.point().label()
    )
}

impl BenchTables {
    /// The tables of these records (the last one of each cell; a later record at the same table
    /// position, e.g. from another GPU or other settings, replaces an earlier one).
    pub fn new(cells: &[CellRecord]) -> Self {
        let mut by_model: BTreeMap<&str, Vec<&CellRecord>> = BTreeMap::new();
        for r in cells {
            by_model.entry(&r.model).or_default().push(r);
        }
        let failures = cells
            .iter()
            .filter_map(|r| {
                let f = r.failure.as_ref().filter(|_| r.status == Status::Failed)?;
                Some(FailureLine {
                    id: r.id.clone(),
                    cell: cell_name(r),
                    short: f.kind.short().into(),
                    reason: f.reason.clone(),
                })
            })
            .collect();
        BenchTables {
            models: by_model
                .into_iter()
                .map(|(m, rs)| model_tables(m, &rs))
                .collect(),
            failures,
        }
    }
}

fn model_tables(model: &str, records: &[&CellRecord]) -> ModelTables {
    let columns: Vec<Point> = records
        .iter()
        .map(|r| r.point())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut grid: BTreeMap<(usize, Runtime, Precision), BTreeMap<Point, &CellRecord>> =
        BTreeMap::new();
    for r in records {
        grid.entry((target_rank(r.target()), r.target(), r.precision()))
            .or_default()
            .insert(r.point(), r);
    }
    let tables = METRICS
        .iter()
        .enumerate()
        // The first table (samples/s) always, so that failures show even when nothing measured.
        .filter(|(i, m)| {
            *i == 0
                || records
                    .iter()
                    .any(|r| r.status == Status::Ok && m.value(r).is_some())
        })
        .map(|(_, m)| m)
        .map(|m| MetricTable {
            title: m.title,
            rows: grid
                .iter()
                .map(|(&(_, target, precision), cells)| Row {
                    target,
                    precision,
                    cells: columns
                        .iter()
                        .map(|p| cell(cells.get(p).copied(), m))
                        .collect(),
                })
                .collect(),
        })
        .collect();
    ModelTables {
        model: model.into(),
        columns,
        tables,
    }
}

fn cell(r: Option<&CellRecord>, m: &Metric) -> Cell {
    let Some(r) = r else { return Cell::Empty };
    match (&r.metrics, &r.failure) {
        (Some(_), _) if r.status == Status::Ok => {
            m.value(r).map_or(Cell::Empty, |value| Cell::Ok { value })
        }
        (_, Some(f)) => Cell::Failed {
            short: f.kind.short().into(),
            reason: f.reason.clone(),
        },
        _ => Cell::Failed {
            short: "error".into(),
            reason: "failed without a reason".into(),
        },
    }
}

/// The headers of a metric table: target, precision, then `batch N` (`batch N seq S` for a
/// swept axis) per column.
pub(crate) fn headers(columns: &[Point]) -> Vec<String> {
    let mut h = vec!["target".to_string(), "precision".to_string()];
    h.extend(columns.iter().map(Point::label));
    h
}

fn table(t: &MetricTable, columns: &[Point]) -> Table {
    let headers = headers(columns);
    let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut align = vec![Align::Left, Align::Left];
    align.resize(headers.len(), Align::Right);
    let mut out = Table::new(&refs).with_align(&align);
    for row in &t.rows {
        let mut cells = vec![row.target.to_string(), row.precision.to_string()];
        cells.extend(row.cells.iter().map(Cell::text));
        out.row(cells);
    }
    out
}

/// The tables for the terminal, or as markdown (headings, tables, the failures as a list).
pub fn render(report: &JournalReport, tables: &BenchTables, markdown: bool) -> String {
    let mut out = String::new();
    if !markdown {
        out += &format!(
            "{} cells: {} ok, {} failed, from {}\n",
            report.cells.len(),
            report.ok,
            report.failed,
            report
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for m in &tables.models {
        out += &if markdown {
            format!("\n## {}\n", m.model)
        } else {
            format!("\nmodel {}\n", m.model)
        };
        for t in &m.tables {
            let rendered = table(t, &m.columns);
            out += &if markdown {
                format!("\n**{}**\n\n{}", t.title, rendered.render_markdown())
            } else {
                format!("\n{}\n{}", t.title, rendered.render())
            };
        }
    }
    if !tables.failures.is_empty() {
        out += if markdown {
            "\n**Failed cells**\n\n"
        } else {
            "\nfailed cells\n"
        };
        for f in &tables.failures {
            let bullet = if markdown { "- " } else { "  " };
            out += &format!("{bullet}{}: {} ({})\n", f.cell, f.short, f.reason);
        }
    }
    out
}

/// One CSV row per cell: `model,target,precision,batch`, one column per swept axis (empty for a
/// cell whose model lacks it; none when nothing was swept), `status,failure,reason,id`, then
/// every metric's column (empty where not measured), full precision.
pub(crate) fn render_csv(report: &JournalReport) -> String {
    let axes: BTreeSet<&str> = report
        .cells
        .iter()
        .flat_map(|r| r.key.dims.keys().map(String::as_str))
        .collect();
    let mut head = vec!["model", "target", "precision", "batch"];
    head.extend(axes.iter().copied());
    head.extend(["status", "failure", "reason", "id"]);
    head.extend(METRICS.iter().map(|m| m.column));
    let mut out = head
        .iter()
        .map(|h| csv_field(h))
        .collect::<Vec<_>>()
        .join(",")
        + "\n";
    for r in &report.cells {
        let (short, reason) = r
            .failure
            .as_ref()
            .filter(|_| r.status == Status::Failed)
            .map(|f| (f.kind.short(), f.reason.as_str()))
            .unwrap_or(("", ""));
        let status = if r.status == Status::Ok {
            "ok"
        } else {
            "failed"
        };
        let sizes = axes.iter().map(|a| {
            r.key
                .dims
                .get(*a)
                .map(|v| v.to_string())
                .unwrap_or_default()
        });
        let mut fields: Vec<String> = [
            r.model.clone(),
            r.target().name().to_string(),
            r.precision().to_string(),
            r.batch().to_string(),
        ]
        .into_iter()
        .chain(sizes)
        .chain([status, short, reason, &r.id].map(String::from))
        .map(|s| csv_field(&s))
        .collect();
        fields.extend(METRICS.iter().map(|m| {
            m.value(r)
                .filter(|v| v.is_finite())
                .map(|v| v.to_string())
                .unwrap_or_default()
        }));
        out += &(fields.join(",") + "\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::record::fixtures::{failed, ok};
    use crate::bench::record::FailureKind;

    fn journal() -> Journal {
        let mut records = vec![];
        for b in [1, 8] {
            records.push(ok(
                "net",
                Precision::Fp16,
                b,
                Runtime::TractCpu,
                2.0 * b as f64,
            ));
            records.push(ok(
                "net",
                Precision::Fp32,
                b,
                Runtime::TractCuda,
                2.0 * b as f64,
            ));
            records.push(ok("net", Precision::Fp32, b, Runtime::Trt, 1.0 * b as f64));
        }
        records.push(failed(
            "net",
            Precision::Fp16,
            8,
            Runtime::Trt,
            FailureKind::Oom,
        ));
        records.push(ok("a,\"b", Precision::Int8, 4, Runtime::OrtCpu, 3.0));
        Journal {
            records,
            skipped: vec![],
            files: vec!["j.jsonl".into()],
        }
    }

    #[test]
    fn tables_have_rows_per_target_precision_and_columns_per_batch() {
        let j = journal();
        let report = JournalReport::new(&j);
        let t = BenchTables::new(&report.cells);
        assert_eq!(t.models.len(), 2);
        let net = &t.models[1];
        assert_eq!(net.model, "net");
        let batches: Vec<usize> = net.columns.iter().map(|p| p.batch).collect();
        assert_eq!(batches, vec![1, 8]);
        let thr = &net.tables[0];
        assert_eq!(thr.title, "samples/s");
        // trt before tract-cpu; within trt fp32 before fp16.
        let rows: Vec<String> = thr
            .rows
            .iter()
            .map(|r| format!("{} {}", r.target, r.precision))
            .collect();
        assert_eq!(
            rows,
            ["trt fp32", "trt fp16", "tract-cuda fp32", "tract-cpu fp16"]
        );
        assert_eq!(thr.rows[1].cells[0].text(), "–");
        assert_eq!(thr.rows[1].cells[1].text(), "OOM");
        assert_eq!(thr.rows[0].cells[1].text(), "1000");
        assert_eq!(t.failures.len(), 1);
        // Power only on GPU targets, but trt has it: the table exists; ort-cpu's model has none.
        let other = &t.models[0];
        assert!(other.tables.iter().all(|t| t.title != "mean power (W)"));
        assert!(net.tables.iter().any(|t| t.title == "mean power (W)"));
        let only_failed = failed("f", Precision::Fp32, 2, Runtime::Trt, FailureKind::Timeout);
        let f = BenchTables::new(std::slice::from_ref(&only_failed));
        assert_eq!(f.models[0].tables.len(), 1);
        assert_eq!(f.models[0].tables[0].rows[0].cells[0].text(), "timeout");
        let text = render(&report, &t, true);
        assert!(
            text.contains("| target | precision | batch 1 | batch 8 |"),
            "{text}"
        );
        assert!(text.contains("| trt | fp16 | – | OOM |"), "{text}");
        assert!(
            text.contains("- net trt fp16 batch 8: OOM (OOM happened)"),
            "{text}"
        );
    }

    #[test]
    fn csv_has_one_quoted_row_per_cell() {
        let j = journal();
        let csv = render_csv(&JournalReport::new(&j));
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 8);
        assert!(
            lines[1].starts_with("\"a,\"\"b\",ort-cpu,int8,4,ok,,,"),
            "{}",
            lines[1]
        );
        assert!(
            csv.contains("net,trt,fp16,8,failed,OOM,OOM happened,"),
            "{csv}"
        );
        let width = lines[0].split(',').count();
        assert!(lines[2..].iter().all(|l| l.split(',').count() == width));
    }

    /// The set-up and the cell's wall time each have a table and a CSV column; a record written
    /// before the set-up was kept shows none, and a failed cell keeps its wall time in the CSV.
    #[test]
    fn set_up_and_cell_wall_time_are_columns() {
        let mut old = ok("net", Precision::Fp32, 8, Runtime::Trt, 8.0);
        old.metrics.as_mut().unwrap().setup = None;
        let mut fast = ok("net", Precision::Fp32, 1, Runtime::Trt, 1.0);
        fast.wall_s = 8.1;
        let j = Journal {
            records: vec![
                fast,
                old,
                failed("net", Precision::Fp16, 1, Runtime::Trt, FailureKind::Oom),
            ],
            skipped: vec![],
            files: vec!["j.jsonl".into()],
        };
        let report = JournalReport::new(&j);
        let t = BenchTables::new(&report.cells);
        let text = render(&report, &t, true);
        // 400 ms open, 100 ms prepare, 3 ms first inference.
        assert!(
            text.contains("**set-up before measuring (s)**\n\n| target | precision | batch 1 | batch 8 |\n| :--- | :--- | ---: | ---: |\n| trt | fp32 | 0.5030 | – |"),
            "{text}"
        );
        assert!(
            text.contains("**cell wall time (s)**\n\n| target | precision | batch 1 | batch 8 |\n| :--- | :--- | ---: | ---: |\n| trt | fp32 | 8.100 | 1.100 |"),
            "{text}"
        );
        let csv = render_csv(&report);
        let lines: Vec<&str> = csv.lines().collect();
        let head: Vec<&str> = lines[0].split(',').collect();
        let at = |name: &str| head.iter().position(|h| *h == name).unwrap();
        let row = |i: usize| -> Vec<&str> { lines[i].split(',').collect() };
        let (setup, wall) = (at("setup_s"), at("cell_wall_s"));
        assert_eq!(row(1)[setup], "0.503", "{csv}");
        assert_eq!(row(1)[wall], "8.1", "{csv}");
        assert_eq!(row(2)[setup], "", "an older record has none: {csv}");
        assert_eq!(row(2)[wall], "1.1", "{csv}");
        assert_eq!(row(3)[setup], "", "a failed cell measured no set-up: {csv}");
        assert_eq!(row(3)[wall], "0.5", "{csv}");
    }

    /// A swept axis makes one column per batch and size, in size order, and one CSV column; a
    /// model without the axis keeps batch-only columns and an empty CSV field.
    #[test]
    fn a_swept_axis_is_a_column_per_size() {
        let at = |seq: i64, ms: f64| {
            let mut r = ok("bert", Precision::Fp16, 1, Runtime::OrtCpu, ms);
            r.key.dims.insert("seq".into(), seq);
            r.id = r.key.id();
            r
        };
        let records = vec![
            at(512, 8.0),
            at(64, 1.0),
            at(128, 2.0),
            ok("net", Precision::Fp32, 2, Runtime::OrtCpu, 1.0),
        ];
        let j = Journal {
            records,
            skipped: vec![],
            files: vec!["j.jsonl".into()],
        };
        let report = JournalReport::new(&j);
        let t = BenchTables::new(&report.cells);
        let text = render(&report, &t, true);
        assert!(
            text.contains(
                "| target | precision | batch 1 seq 64 | batch 1 seq 128 | batch 1 seq 512 |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| ort-cpu | fp16 | 1000 | 500.0 | 125.0 |"),
            "{text}"
        );
        assert!(text.contains("| target | precision | batch 2 |"), "{text}");
        let csv = render_csv(&report);
        let lines: Vec<&str> = csv.lines().collect();
        assert!(
            lines[0].starts_with("model,target,precision,batch,seq,status,"),
            "{}",
            lines[0]
        );
        assert!(lines[1].starts_with("bert,ort-cpu,fp16,1,64,ok,"), "{csv}");
        assert!(lines[4].starts_with("net,ort-cpu,fp32,2,,ok,"), "{csv}");
    }
}
