//! The self-contained HTML page of `trtkit report`: inline CSS and SVG, nothing fetched. Per
//! model the plots of [`super::plots`] and the tables of [`super::bench`] (a failed cell red, its
//! whole reason in a tooltip); then the NVML readings of one cell, the failures and the journal
//! lines that were skipped. Every text from the journal is escaped.

use crate::bench::record::CellRecord;
use crate::report::bench::{cell_name, headers, BenchTables, Cell, JournalReport, ModelTables};
use crate::report::plots;

const STYLE: &str = "
body { font-family: sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 19px; margin-top: 32px; border-bottom: 1px solid #ccc; }
h3 { font-size: 14px; margin: 12px 0 4px; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
.plots svg { border: 1px solid #e4e4e4; }
.tables { display: flex; flex-wrap: wrap; gap: 8px 28px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.empty { text-align: center; color: #aaa; }
td.failed { background: #fde4e4; color: #9b1c1c; text-align: center; }
.meta { color: #555; font-size: 13px; }
li { font-size: 13px; }
";

/// `s` safe inside HTML text and attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The whole page; `monitor` is the cell whose NVML readings are plotted.
pub fn render(
    report: &JournalReport,
    tables: &BenchTables,
    monitor: Option<&CellRecord>,
) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>trtkit bench report</title><style>{STYLE}</style></head><body>\n\
         <h1>trtkit bench report</h1>\n<p class=\"meta\">{} cells: {} ok, {} failed. Journals: {}.</p>\n",
        report.cells.len(),
        report.ok,
        report.failed,
        escape(&report.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")),
    );
    for (i, m) in tables.models.iter().enumerate() {
        out += &model_section(report, m, i);
    }
    if let Some(svg) = monitor.and_then(plots::monitor) {
        let id = monitor
            .map(|c| format!("{} (cell {})", cell_name(c), c.id))
            .unwrap_or_default();
        out += &format!("<h2 id=\"nvml\">Power, SM utilisation and memory over time</h2>\n<p class=\"meta\">{}</p>\n<div class=\"plots\">{svg}</div>\n", escape(&id));
    }
    if !tables.failures.is_empty() {
        out += "<h2 id=\"failures\">Failed cells</h2>\n<ul>\n";
        for f in &tables.failures {
            out += &format!(
                "<li><b>{}</b>: {} — {}</li>\n",
                escape(&f.cell),
                escape(&f.short),
                escape(&f.reason)
            );
        }
        out += "</ul>\n";
    }
    if !report.skipped.is_empty() {
        out += "<h2>Skipped journal lines</h2>\n<ul>\n";
        for s in &report.skipped {
            out += &format!("<li>{}</li>\n", escape(s));
        }
        out += "</ul>\n";
    }
    out + "</body></html>\n"
}

fn model_section(report: &JournalReport, m: &ModelTables, index: usize) -> String {
    let cells: Vec<&CellRecord> = report.cells.iter().filter(|c| c.model == m.model).collect();
    let svgs: Vec<String> = [plots::throughput, plots::latency, plots::accuracy]
        .iter()
        .filter_map(|plot| plot(&m.model, &cells))
        .collect();
    let mut out = format!(
        "<h2 id=\"model-{index}\">{}</h2>\n<div class=\"plots\">{}</div>\n<div class=\"tables\" id=\"tables-{index}\">\n",
        escape(&m.model),
        svgs.join("\n")
    );
    let head: String = headers(&m.columns)
        .iter()
        .map(|h| format!("<th>{}</th>", escape(h)))
        .collect();
    for t in &m.tables {
        out += &format!(
            "<div><h3>{}</h3><table><thead><tr>{head}</tr></thead><tbody>\n",
            escape(t.title)
        );
        for row in &t.rows {
            let cells: String = row.cells.iter().map(td).collect();
            out += &format!(
                "<tr><td>{}</td><td>{}</td>{cells}</tr>\n",
                row.target, row.precision
            );
        }
        out += "</tbody></table></div>\n";
    }
    out + "</div>\n"
}

fn td(c: &Cell) -> String {
    match c {
        Cell::Empty => "<td class=\"empty\">–</td>".into(),
        Cell::Ok { .. } => format!("<td class=\"num\">{}</td>", c.text()),
        Cell::Failed { short, reason } => {
            format!(
                "<td class=\"failed\" title=\"{}\">{}</td>",
                escape(reason),
                escape(short)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::select::Runtime;
    use crate::bench::journal::Journal;
    use crate::bench::record::fixtures::{failed, ok};
    use crate::bench::record::FailureKind;
    use crate::tensor::Precision;

    #[test]
    fn page_has_plots_tables_and_escapes_the_journal() {
        let mut bad = failed(
            "<b>x",
            Precision::Fp16,
            4,
            Runtime::Trt,
            FailureKind::UnsupportedGpu,
        );
        if let Some(f) = bad.failure.as_mut() {
            f.reason = "cc 9.0 \"<script>\"".into();
        }
        let records = vec![ok("<b>x", Precision::Fp32, 4, Runtime::Trt, 2.0), bad];
        let j = Journal {
            records,
            skipped: vec!["j:3: <eof>".into()],
            files: vec!["a&b/journal.jsonl".into()],
        };
        let report = JournalReport::new(&j);
        let tables = BenchTables::new(&report.cells);
        let cell = plots::pick_cell(&report.cells, None).unwrap();
        let page = render(&report, &tables, cell);
        assert!(page.contains(">&lt;b&gt;x</h2>"), "{page}");
        assert!(!page.contains("<b>x") && !page.contains("<script>"));
        assert!(page.contains("title=\"cc 9.0 &quot;&lt;script&gt;&quot;\">unsupported GPU</td>"));
        assert!(page.contains("a&amp;b/journal.jsonl") && page.contains("j:3: &lt;eof&gt;"));
        assert!(
            page.matches("<svg").count() >= 4,
            "throughput, latency, accuracy and NVML"
        );
        assert!(!page.contains("http://") || !page.contains("src=\"http"));
    }
}
