//! The report of `compare --layerwise`: the two sides, one row per intermediate tensor in graph
//! order, the first divergence, and (by `--plot`) each tensor's error against its depth as SVG.

use crate::jobs::layerwise::all::LayerwiseAllReport;
use crate::jobs::layerwise::LayerwiseReport;
use crate::metrics::layerwise::TensorDivergence;
use crate::report::format::num;
use crate::report::plot_scale::Scale;
use crate::report::plots::{draw_axes, svg, Area, Drawn};
use crate::report::table::Table;
use plotters::prelude::*;

/// An error metric as the table shows it: NaN and Inf spelled out.
fn error(v: f64) -> String {
    if v.is_finite() {
        num(v)
    } else {
        format!("{v}")
    }
}

/// The tensor table's row of `t`; diverged tensors get a `<` after their cosine.
fn row(t: &TensorDivergence, threshold: f64) -> Vec<String> {
    let f = &t.figures;
    let shape: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
    vec![
        t.name.clone(),
        format!("{} ({})", t.node, t.op),
        shape.join("×"),
        format!(
            "{:.6}{}",
            f.cosine,
            if t.diverges(threshold) { " <" } else { "" }
        ),
        error(f.max_abs_err),
        error(f.max_rel_err),
        format!("{:.2}", f.close_pct),
        format!("{}/{}", f.nan_a, f.nan_b),
        format!("{}/{}", f.inf_a, f.inf_b),
        if f.beyond_fp16_pct > 0.0 {
            format!("{:.3}", f.beyond_fp16_pct)
        } else {
            "0".into()
        },
    ]
}

/// The tables of a layerwise report, for the terminal or as markdown.
pub fn render(r: &LayerwiseReport, markdown: bool) -> String {
    let show = |t: &Table| {
        if markdown {
            t.render_markdown()
        } else {
            t.render()
        }
    };
    let mut sides = Table::new(&["side", "graph", "backend"]);
    sides.row(vec!["A".into(), r.a.clone(), r.backend_a.clone()]);
    sides.row(vec!["B".into(), r.b.clone(), r.backend_b.clone()]);
    let mut out = show(&sides);
    let t = &r.tolerance;
    out += &format!(
        "\ninputs: {} ({} samples, batch {})\nisclose: |A - B| <= {} + {} * |B|; diverged (<): cosine below {}\n\n",
        r.inputs, r.samples, r.batch, t.atol, t.rtol, r.cosine_threshold
    );
    let mut table = Table::new(&[
        "tensor",
        "node (op)",
        "shape",
        "cosine",
        "max abs err",
        "max rel err",
        "close %",
        "NaN A/B",
        "Inf A/B",
        "B beyond fp16 %",
    ]);
    for tensor in &r.tensors {
        table.row(row(tensor, r.cosine_threshold));
    }
    out += &show(&table);
    out += &match &r.first_divergence {
        Some(d) => format!(
            "\nfirst divergence: '{}', made by {} ({}), cosine {:.6}\n",
            d.tensor, d.node, d.op, d.cosine
        ),
        None => format!(
            "\nno divergence: every tensor's cosine is at least {}\n",
            r.cosine_threshold
        ),
    };
    if !r.unmatched.is_empty() {
        // The JSON lists them all; a constant-weight model lists every weight here.
        const SHOWN: usize = 8;
        let more = r.unmatched.len().saturating_sub(SHOWN);
        out += &format!(
            "{} tensors not in A (not compared): {}{}\n",
            r.unmatched.len(),
            r.unmatched[..r.unmatched.len().min(SHOWN)].join(", "),
            if more > 0 {
                format!(", and {more} more (--json lists them)")
            } else {
                String::new()
            }
        );
    }
    if !r.same_for_every_sample.is_empty() {
        out += &format!(
            "{} tensors with no batch axis (constants, shape arithmetic) not compared\n",
            r.same_for_every_sample.len()
        );
    }
    let m = &r.memory;
    out += &format!(
        "memory: {} group(s) of marked tensors, at most {} of them held at once{}\n",
        m.groups,
        crate::units::bytes(m.peak_marked_bytes),
        m.peak_rss_bytes
            .map(|b| format!(", peak RSS {}", crate::units::bytes(b)))
            .unwrap_or_default()
    );
    out
}

/// The smallest error a log axis shows: a cosine of exactly 1 is drawn here.
const FLOOR: f64 = 1e-12;

const BLUE: RGBColor = RGBColor(31, 119, 180);
const RED: RGBColor = RGBColor(214, 39, 40);

/// Each tensor's `1 − cosine` (log scale where it spans enough; a NaN cosine drawn at 1)
/// against its depth in the graph, the threshold as a dashed line, diverged tensors in red and
/// the first divergence ringed and named. `None` when there is nothing to draw.
pub fn plot(r: &LayerwiseReport) -> Option<String> {
    if r.tensors.is_empty() {
        return None;
    }
    let err = |t: &TensorDivergence| t.cosine_error().max(FLOOR);
    let line = (1.0 - r.cosine_threshold).max(FLOOR);
    let mut ys: Vec<f64> = r.tensors.iter().map(err).collect();
    ys.push(line);
    let y = Scale::fit(&ys, 100.0, false)?;
    let depths: Vec<f64> = r.tensors.iter().map(|t| t.depth as f64).collect();
    let x = Scale::fit(&depths, f64::INFINITY, true)?;
    let first = r
        .first_divergence
        .as_ref()
        .and_then(|d| r.tensors.iter().find(|t| t.name == d.tensor));
    svg((720, 420), |root: &Area| -> Drawn {
        let mut c = ChartBuilder::on(root)
            .caption(
                "layerwise divergence: 1 − cosine by depth",
                ("sans-serif", 17),
            )
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(72)
            .build_cartesian_2d(x.clone(), y.clone())?;
        draw_axes(
            &mut c,
            (&x, "depth (nodes from the inputs)"),
            (&y, &format!("1 − cosine{}", y.suffix())),
        )?;
        let (x0, x1) = (
            x.map(0.0).unwrap_or(0.0),
            x.map(depths.iter().copied().fold(0.0, f64::max)),
        );
        if let (Some(ly), Some(x1)) = (y.map(line), x1) {
            c.draw_series(DashedLineSeries::new(
                vec![(x0, ly), (x1, ly)],
                6,
                4,
                BLACK.mix(0.5).stroke_width(1),
            ))?;
        }
        let dots = r.tensors.iter().filter_map(|t| {
            let (px, py) = (x.map(t.depth as f64)?, y.map(err(t))?);
            let color = if t.diverges(r.cosine_threshold) {
                RED
            } else {
                BLUE
            };
            Some(Circle::new((px, py), 3, color.filled()))
        });
        c.draw_series(dots)?;
        if let Some(t) = first {
            if let (Some(px), Some(py)) = (x.map(t.depth as f64), y.map(err(t))) {
                let label = format!(
                    "first divergence: {} ({}), cosine {:.6}",
                    t.name, t.op, t.figures.cosine
                );
                // Ringed, and named beside the ring (left of it near the right edge).
                let dx = if px > (x.map(0.0).unwrap_or(0.0) + x1.unwrap_or(px)) / 2.0 {
                    -12 - 6 * label.chars().count() as i32
                } else {
                    12
                };
                c.draw_series([EmptyElement::at((px, py))
                    + Circle::new((0, 0), 8, RED.stroke_width(2))
                    + Text::new(label, (dx, 4), ("sans-serif", 12))])?;
            }
        }
        Ok(())
    })
}

/// Writes [`plot`] of `r` to `path` (atomically); an error when there is nothing to draw.
pub(crate) fn write_plot(r: &LayerwiseReport, path: &std::path::Path) -> anyhow::Result<()> {
    let Some(svg) = plot(r) else {
        anyhow::bail!("{}: no tensor to plot", path.display());
    };
    crate::atomic_file::write_atomic(path, svg.as_bytes())
        .map_err(|e| e.context(format!("{}: cannot write the plot", path.display())))
}

/// The layerwise reports of a workspace: one section per kept graph, then the notes.
pub(crate) fn render_all(r: &LayerwiseAllReport, markdown: bool) -> String {
    let mut out = String::new();
    for g in &r.graphs {
        out += &format!(
            "{} graph of {} against {}\n\n",
            g.precision, g.engine, r.model
        );
        out += &render(&g.report, markdown);
        out += "\n";
    }
    for note in &r.notes {
        out += &format!("note: {note}\n");
    }
    out
}

/// Where the plot of one kept graph goes when `--plot FILE.svg` is given in a workspace:
/// `FILE-<engine file name>.svg` beside it.
pub(crate) fn plot_path_for(path: &std::path::Path, engine: &str) -> std::path::PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let engine = std::path::Path::new(engine)
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    path.with_file_name(format!("{stem}-{engine}.svg"))
}
