//! The closeness report of `compare` (and of saved compare reports): how far A is from the
//! reference B per output, and how often their top-k classes disagree, as tables.

use crate::jobs::compare::{CompareManyReport, CompareReport};
use crate::report::format::num;
use crate::report::table::Table;
use crate::report::task::render_task;
use crate::units::bytes;

/// The tables of a compare report, for the terminal or as markdown: the two sides, the
/// tolerance, closeness per output, and the top-k rank table of classifier outputs.
pub fn render(r: &CompareReport, markdown: bool) -> String {
    let show = |t: &Table| {
        if markdown {
            t.render_markdown()
        } else {
            t.render()
        }
    };
    let mut sides = Table::new(&[
        "side",
        "source",
        "backend",
        "samples",
        "batch",
        "inference s",
        "samples/s",
    ]);
    for s in &r.sides {
        let ran = |text: String| if s.samples > 0 { text } else { "-".into() };
        sides.row(vec![
            s.label.clone(),
            s.source.clone(),
            s.backend.clone(),
            ran(s.samples.to_string()),
            ran(s.batch.to_string()),
            ran(format!("{:.3}", s.inference_s)),
            ran(format!("{:.1}", s.samples_per_s)),
        ]);
    }
    let mut out = show(&sides);
    let t = &r.tolerance;
    let label = |i: usize, or: &str| r.sides.get(i).map_or(or.to_string(), |s| s.label.clone());
    let (a, b) = (label(0, "A"), label(1, "B"));
    out += &format!(
        "\ninputs: {}\nisclose: |{a} - {b}| <= {} + {} * |{b}|{}\n",
        r.inputs,
        t.atol,
        t.rtol,
        if t.equal_nan { ", NaN == NaN" } else { "" }
    );
    if let Some(peak) = r.peak_rss_bytes {
        out += &format!("peak memory (RSS): {}\n", bytes(peak));
    }
    out.push('\n');
    let mut t = Table::new(&[
        "output",
        "shape",
        "equal %",
        "all-close samples %",
        "max abs err",
        "max rel err",
        "mean abs err",
        "cosine",
        "NaN A/B",
        "Inf A/B",
    ]);
    for o in &r.outputs {
        let c = &o.closeness;
        let shape: Vec<String> = o.shape.iter().map(|d| d.to_string()).collect();
        t.row(vec![
            o.name.clone(),
            shape.join("×"),
            format!("{:.2}", c.equal_pct),
            format!("{:.2}", c.all_close_samples_pct),
            error(c.max_abs_err),
            error(c.max_rel_err),
            error(c.mean_abs_err),
            format!("{:.6}", c.cosine),
            format!("{}/{}", c.nan_a, c.nan_b),
            format!("{}/{}", c.inf_a, c.inf_b),
        ]);
    }
    out += &show(&t);
    for o in &r.outputs {
        let Some(k) = &o.topk else { continue };
        out += &format!(
            "\ntop-{} of '{}' (ranks ordered by {b}, {} samples × {} classes); top-1 agreement {:.2}%\n\n",
            k.ranks.len(),
            o.name,
            k.samples,
            k.classes,
            k.top1_agreement_pct
        );
        let mut t = Table::new(&["rank", "MAE", "disagreement %"]);
        for row in &k.ranks {
            t.row(vec![
                row.rank.to_string(),
                num(row.mae),
                format!("{:.2}", row.disagreement_pct),
            ]);
        }
        out += &show(&t);
    }
    if let Some(task) = &r.task {
        out += &render_task(task, &show);
    }
    for note in &r.notes {
        out += &format!("\nnote: {note}\n");
    }
    out
}

/// The report of `compare A B C …`: each comparison with the reference, one after the other,
/// under a line naming its two sides.
pub(crate) fn render_many(r: &CompareManyReport, markdown: bool) -> String {
    let mut out = String::new();
    for (i, c) in r.comparisons.iter().enumerate() {
        let tested = c.sides.first().map_or("?", |s| s.label.as_str());
        let heading = format!("{tested} vs {} (the reference)", r.reference);
        if i > 0 {
            out.push('\n');
        }
        out += &if markdown {
            format!("## {heading}\n\n")
        } else {
            format!("{heading}\n\n")
        };
        out += &render(c, markdown);
    }
    out
}

/// An error metric as the table shows it: NaN and Inf spelled out (a dash would read as "not
/// measured" where the outputs disagree in non-finite values).
fn error(v: f64) -> String {
    if v.is_finite() {
        num(v)
    } else {
        format!("{v}")
    }
}
