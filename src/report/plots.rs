//! The SVG plots of `trtkit report`, drawn with plotters: throughput against batch size (and the
//! swept axes' sizes, where a plan sweeps one), latency
//! bars with p99 whiskers, accuracy against latency (one each per model), and NVML power, SM
//! utilisation and memory over time for one cell. Each returns `None` when there is nothing to
//! draw; none panics on degenerate data (one point, equal values, zeros, NaN).

use crate::backend::select::Runtime;
use crate::bench::key::Point;
use crate::bench::record::{CellMetrics, CellRecord, MonitorSample, Status};
use crate::report::bench::target_rank;
use crate::report::plot_scale::Scale;
use crate::tensor::Precision;
use anyhow::{bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

type Coord = Cartesian2d<Scale, Scale>;
pub(super) type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Coord>;
pub(super) type Area<'b> = DrawingArea<SVGBackend<'b>, Shift>;
pub(super) type Drawn = std::result::Result<(), Box<dyn std::error::Error>>;

const SIZE: (u32, u32) = (660, 400);
const LEGEND_WIDTH: u32 = 130;
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The measured cells of one target at one precision, by batch size and swept sizes.
struct Series<'a> {
    label: String,
    color: RGBColor,
    precision: Precision,
    cells: Vec<(Point, &'a CellMetrics)>,
}

fn series<'a>(cells: &[&'a CellRecord]) -> Vec<Series<'a>> {
    let mut groups: BTreeMap<(usize, Runtime, Precision), BTreeMap<Point, &CellMetrics>> =
        BTreeMap::new();
    for r in cells.iter().filter(|r| r.status == Status::Ok) {
        if let Some(m) = &r.metrics {
            groups
                .entry((target_rank(r.target()), r.target(), r.precision()))
                .or_default()
                .insert(r.point(), m);
        }
    }
    groups
        .into_iter()
        .enumerate()
        .map(|(i, ((_, t, p), cells))| Series {
            label: format!("{t} {p}"),
            color: PALETTE[i % PALETTE.len()],
            precision: p,
            cells: cells.into_iter().collect(),
        })
        .collect()
}

/// Draws an SVG of `size` with `draw`; `None` when drawing failed.
pub(super) fn svg(size: (u32, u32), draw: impl FnOnce(&Area) -> Drawn) -> Option<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).ok()?;
        draw(&root).ok()?;
        root.present().ok()?;
    }
    Some(out)
}

/// The axes (each a scale and its description) and a faint grid of a report chart, in the one
/// style every plot of the report shares.
pub(super) fn draw_axes(c: &mut Chart<'_, '_>, x: (&Scale, &str), y: (&Scale, &str)) -> Drawn {
    let (xl, yl) = (|p: &f64| x.0.label(*p), |p: &f64| y.0.label(*p));
    c.configure_mesh()
        .x_desc(x.1)
        .y_desc(y.1)
        .x_label_formatter(&xl)
        .y_label_formatter(&yl)
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 13))
        .bold_line_style(BLACK.mix(0.08))
        .draw()?;
    Ok(())
}

/// A chart with its axes and grid on `area`, then `body` drawn in it.
fn chart<'b>(
    area: &Area<'b>,
    title: &str,
    x: (&Scale, &str),
    y: (&Scale, &str),
    legend: &[Series],
    body: impl for<'a> FnOnce(&mut Chart<'a, 'b>) -> Drawn,
) -> Drawn {
    let mut builder = ChartBuilder::on(area);
    if !title.is_empty() {
        builder.caption(title, ("sans-serif", 17));
    }
    let mut c = builder
        .margin(12)
        .margin_right(if legend.is_empty() {
            12
        } else {
            12 + LEGEND_WIDTH
        })
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x.0.clone(), y.0.clone())?;
    draw_axes(
        &mut c,
        (x.0, &format!("{}{}", x.1, x.0.suffix())),
        (y.0, &format!("{}{}", y.1, y.0.suffix())),
    )?;
    body(&mut c)?;
    // Right of the plotting area, where it hides no data: a marker and the name per series.
    let left = area.dim_in_pixel().0 as i32 - LEGEND_WIDTH as i32;
    for (i, s) in legend.iter().enumerate() {
        let y = 48 + 18 * i as i32;
        area.draw(&legend_marker(s.precision, (left, y), s.color))?;
        area.draw(&Text::new(
            s.label.clone(),
            (left + 18, y - 6),
            ("sans-serif", 12),
        ))?;
    }
    Ok(())
}

/// A marker per precision, as pixel offsets of a polygon: a disc for fp32, a triangle for fp16,
/// a diamond for int8.
fn shape(p: Precision) -> Vec<(i32, i32)> {
    let (n, r, turn) = match p {
        Precision::Fp32 => (12, 4.0, 0.0),
        Precision::Fp16 => (3, 5.5, -0.25),
        Precision::Int8 => (4, 5.5, 0.0),
    };
    (0..n)
        .map(|i| {
            let a = std::f64::consts::TAU * (i as f64 / n as f64 + turn);
            ((r * a.cos()).round() as i32, (r * a.sin()).round() as i32)
        })
        .collect()
}

/// [`shape`] in the legend, at backend pixel `at`.
fn legend_marker(p: Precision, at: (i32, i32), color: RGBColor) -> Polygon<(i32, i32)> {
    let pts: Vec<(i32, i32)> = shape(p)
        .into_iter()
        .map(|(x, y)| (x + at.0 + 8, y + at.1))
        .collect();
    Polygon::new(pts, color.filled())
}

fn points(series: &[Series]) -> Vec<Point> {
    let set: BTreeSet<Point> = series
        .iter()
        .flat_map(|s| s.cells.iter().map(|c| c.0.clone()))
        .collect();
    set.into_iter().collect()
}

/// The x axis of the size categories, and its title: `batch size`, or `batch size, seq` when
/// an axis was swept.
fn size_axis(points: &[Point]) -> (Scale, String) {
    let axes: BTreeSet<&String> = points.iter().flat_map(|p| p.dims.keys()).collect();
    let title = std::iter::once("batch size")
        .chain(axes.iter().map(|a| a.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let labels: Vec<String> = points.iter().map(Point::short_label).collect();
    (Scale::categories(&labels), title)
}

fn slot(points: &[Point], p: &Point) -> f64 {
    points.iter().position(|x| x == p).unwrap_or(0) as f64
}

/// The label beside an accuracy point: `b8`, or `b8 seq 128`.
fn point_tag(p: &Point) -> String {
    format!("b{}", p.short_label())
}

/// Samples/s against batch size, one line per target and precision, for one model's cells.
pub fn throughput(model: &str, cells: &[&CellRecord]) -> Option<String> {
    let series = series(cells);
    let bs = points(&series);
    let values: Vec<f64> = series
        .iter()
        .flat_map(|s| s.cells.iter().map(|c| c.1.samples_per_s))
        .collect();
    let y = Scale::fit(&values, 10.0, true)?;
    let (x, x_title) = size_axis(&bs);
    svg(SIZE, |root| {
        chart(
            root,
            &format!("{model}: throughput"),
            (&x, &x_title),
            (&y, "samples/s"),
            &series,
            |c| {
                for s in &series {
                    let pts: Vec<(f64, f64)> = s
                        .cells
                        .iter()
                        .filter_map(|(b, m)| Some((slot(&bs, b) + 0.5, y.map(m.samples_per_s)?)))
                        .collect();
                    let (color, p) = (s.color, s.precision);
                    c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?;
                    c.draw_series(
                        pts.into_iter().map(|at| {
                            EmptyElement::at(at) + Polygon::new(shape(p), color.filled())
                        }),
                    )?;
                }
                Ok(())
            },
        )
    })
}

/// Mean latency-all as bars with a whisker up to p99, grouped by batch size, for one model.
pub fn latency(model: &str, cells: &[&CellRecord]) -> Option<String> {
    let series = series(cells);
    let bs = points(&series);
    let values: Vec<f64> = series
        .iter()
        .flat_map(|s| {
            s.cells
                .iter()
                .flat_map(|c| [c.1.latency_all_ms.mean, c.1.latency_all_ms.p99])
        })
        .collect();
    let y = Scale::fit(&values, 30.0, true)?;
    let (x, x_title) = size_axis(&bs);
    let w = 0.8 / series.len().max(1) as f64;
    svg(SIZE, |root| {
        chart(
            root,
            &format!("{model}: latency-all mean, whisker to p99"),
            (&x, &x_title),
            (&y, "ms per batch"),
            &series,
            |c| {
                for (j, s) in series.iter().enumerate() {
                    let color = s.color;
                    let mut bars = vec![];
                    let mut whiskers = vec![];
                    for (b, m) in &s.cells {
                        let x0 = slot(&bs, b) + 0.1 + j as f64 * w;
                        let (Some(mean), p99) =
                            (y.map(m.latency_all_ms.mean), y.map(m.latency_all_ms.p99))
                        else {
                            continue;
                        };
                        bars.push(Rectangle::new(
                            [(x0, y.base()), (x0 + w * 0.9, mean)],
                            color.filled(),
                        ));
                        if let Some(p99) = p99.filter(|p| *p > mean) {
                            let mid = x0 + w * 0.45;
                            whiskers.push(PathElement::new(
                                vec![(mid, mean), (mid, p99)],
                                BLACK.stroke_width(1),
                            ));
                            whiskers.push(PathElement::new(
                                vec![(mid - w * 0.2, p99), (mid + w * 0.2, p99)],
                                BLACK.stroke_width(1),
                            ));
                        }
                    }
                    c.draw_series(bars)?;
                    c.draw_series(whiskers)?;
                }
                Ok(())
            },
        )
    })
}

/// Accuracy (mAP, mIoU or top-1; without a dataset, agreement with FP32: matched boxes, pixels
/// or top-1) against ms per sample, one point per cell, labelled with its batch size (and swept sizes), for one model.
pub fn accuracy(model: &str, cells: &[&CellRecord]) -> Option<String> {
    let series = series(cells);
    type Get = fn(&CellMetrics) -> Option<f64>;
    let map: Get = |m| m.accuracy.as_ref().and_then(|a| a.map_pct);
    let miou: Get = |m| m.accuracy.as_ref().and_then(|a| a.miou_pct);
    let top1: Get = |m| m.accuracy.as_ref().map(|a| a.top1_pct);
    let task: Get = |m| m.closeness.as_ref().and_then(|c| c.task_agreement_pct);
    let agree: Get = |m| m.closeness.as_ref().and_then(|c| c.top1_agreement_pct);
    let any = |f: Get| {
        series
            .iter()
            .any(|s| s.cells.iter().any(|c| f(c.1).is_some()))
    };
    let choices: [(Get, &str); 5] = [
        (map, "mAP@0.5:0.95 %"),
        (miou, "mIoU %"),
        (top1, "top-1 %"),
        (task, "boxes or pixels agreeing with FP32 %"),
        (agree, "top-1 agreement with FP32 %"),
    ];
    let (get, what) = choices.into_iter().find(|(f, _)| any(*f))?;
    let points = |s: &Series| -> Vec<(String, f64, f64)> {
        s.cells
            .iter()
            .filter_map(|(b, m)| Some((point_tag(b), m.ms_per_sample, get(m)?)))
            .collect()
    };
    let all: Vec<(String, f64, f64)> = series.iter().flat_map(points).collect();
    let x = Scale::fit(&all.iter().map(|p| p.1).collect::<Vec<_>>(), 10.0, false)?;
    let y = Scale::fit(
        &all.iter().map(|p| p.2).collect::<Vec<_>>(),
        f64::INFINITY,
        false,
    )?;
    svg(SIZE, |root| {
        chart(
            root,
            &format!("{model}: {what} vs latency"),
            (&x, "ms per sample"),
            (&y, what),
            &series,
            |c| {
                let mut placed = vec![];
                for s in &series {
                    let color = s.color;
                    let pts: Vec<(String, (f64, f64))> = points(s)
                        .into_iter()
                        .filter_map(|(b, ms, a)| Some((b, (x.map(ms)?, y.map(a)?))))
                        .collect();
                    let p = s.precision;
                    c.draw_series(pts.iter().map(|(_, at)| {
                        EmptyElement::at(*at) + Polygon::new(shape(p), color.filled())
                    }))?;
                    let font = ("sans-serif", 10).into_font().color(&color);
                    let labels: Vec<_> = pts
                        .iter()
                        .filter(|(tag, at)| {
                            place_label_if_clear(&mut placed, c.backend_coord(at), tag)
                        })
                        .map(|(tag, at)| {
                            EmptyElement::at(*at) + Text::new(tag.clone(), (6, -14), font.clone())
                        })
                        .collect();
                    c.draw_series(labels)?;
                }
                Ok(())
            },
        )
    })
}

/// Whether a batch label `text` drawn beside the point at pixel `at` overlaps none of the `placed`
/// ones; if so it is placed.
fn place_label_if_clear(placed: &mut Vec<[i32; 4]>, at: (i32, i32), text: &str) -> bool {
    let b = [
        at.0 + 5,
        at.1 - 16,
        at.0 + 8 + 7 * text.len() as i32,
        at.1 - 3,
    ];
    let clear = placed
        .iter()
        .all(|p| b[2] <= p[0] || p[2] <= b[0] || b[3] <= p[1] || p[3] <= b[1]);
    if clear {
        placed.push(b);
    }
    clear
}

/// The cell whose readings the page plots: `id` (whole, or a prefix naming one cell), or else the
/// measured GPU cell with the most NVML readings (`None` when no cell has any).
pub(crate) fn pick_cell<'a>(
    cells: &'a [CellRecord],
    id: Option<&str>,
) -> Result<Option<&'a CellRecord>> {
    let Some(id) = id else {
        let readings = |r: &CellRecord| r.metrics.as_ref().map_or(0, |m| m.monitor.len());
        // The first of the cells with the most readings.
        let best = cells
            .iter()
            .filter(|r| r.target().on_gpu() && readings(r) > 0)
            .rev()
            .max_by_key(|r| readings(r));
        return Ok(best);
    };
    let found: Vec<&CellRecord> = cells
        .iter()
        .filter(|r| r.id == id || r.id.starts_with(id) || r.label() == id)
        .collect();
    match found.as_slice() {
        [one] => Ok(Some(*one)),
        [] => bail!("--cell {id}: no cell of the journal has this id or label (model/precision/bBATCH/target)"),
        _ if found.iter().any(|r| r.id == id) => Ok(found.into_iter().find(|r| r.id == id)),
        _ => bail!(
            "--cell {id}: {} cells start with this id; give more of it",
            found.len()
        ),
    }
}

/// Power (W), SM utilisation (%) and memory used (MiB) over the measured phase of one cell, as
/// three panels (`None` when the cell has no readings).
pub fn monitor(cell: &CellRecord) -> Option<String> {
    let samples = &cell.metrics.as_ref()?.monitor;
    type Get = fn(&MonitorSample) -> Option<f64>;
    let panels: [(&str, Get); 3] = [
        ("power W", |s| s.power_w),
        ("SM util %", |s| s.sm_util_pct),
        ("memory used MiB", |s| s.memory_used_mib),
    ];
    let panels: Vec<(&str, Vec<(f64, f64)>)> = panels
        .iter()
        .map(|(name, get)| {
            (
                *name,
                samples
                    .iter()
                    .filter_map(|s| Some((s.t_s, get(s)?)))
                    .filter(|p| p.0.is_finite() && p.1.is_finite())
                    .collect::<Vec<_>>(),
            )
        })
        .filter(|(_, pts)| !pts.is_empty())
        .collect();
    if panels.is_empty() {
        return None;
    }
    let title = format!(
        "{} {} {} {}: NVML readings",
        cell.model,
        cell.target(),
        cell.precision(),
        cell.point().label()
    );
    svg((SIZE.0, 40 + 190 * panels.len() as u32), |root| {
        let root = root.titled(&title, ("sans-serif", 17))?;
        for (area, (name, pts)) in root.split_evenly((panels.len(), 1)).iter().zip(&panels) {
            let fit = |v: Vec<f64>| Scale::fit(&v, f64::INFINITY, true).ok_or("no values");
            let x = fit(pts.iter().map(|p| p.0).collect())?;
            let y = fit(pts.iter().map(|p| p.1).collect())?;
            chart(area, "", (&x, "seconds"), (&y, name), &[], |c| {
                c.draw_series(LineSeries::new(pts.clone(), PALETTE[0].stroke_width(2)))?;
                c.draw_series(pts.iter().map(|p| Circle::new(*p, 2, PALETTE[0].filled())))?;
                Ok(())
            })?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::record::fixtures::{failed, ok};
    use crate::bench::record::FailureKind;

    fn all(cells: &[&CellRecord]) -> Vec<Option<String>> {
        let mut v = vec![
            throughput("m", cells),
            latency("m", cells),
            accuracy("m", cells),
        ];
        v.extend(cells.iter().map(|c| monitor(c)));
        v
    }

    #[test]
    fn plots_draw_lines_bars_points_and_text() {
        let recs: Vec<CellRecord> = [1, 4, 16]
            .iter()
            .flat_map(|&b| {
                [
                    ok("m", Precision::Fp32, b, Runtime::Trt, b as f64),
                    ok("m", Precision::Int8, b, Runtime::TractCpu, 90.0 * b as f64),
                ]
            })
            .collect();
        let cells: Vec<&CellRecord> = recs.iter().collect();
        let t = throughput("m", &cells).unwrap();
        assert!(
            t.starts_with("<svg") && t.contains("<polyline") && t.contains("trt fp32"),
            "{t}"
        );
        assert!(latency("m", &cells).unwrap().contains("(log)"));
        assert!(
            accuracy("m", &cells).unwrap().contains("b1"),
            "labels that would overlap are left out"
        );
        let cell = pick_cell(&recs, None).unwrap().unwrap();
        assert_eq!(cell.target(), Runtime::Trt);
        assert!(monitor(cell).unwrap().contains("SM util %"));
        assert_eq!(
            pick_cell(&recs, Some(&cell.id[..10])).unwrap().unwrap().id,
            cell.id
        );
        let by_label = pick_cell(&recs, Some(&cell.label())).unwrap().unwrap();
        assert_eq!(by_label.id, cell.id);
        assert!(cell.label().starts_with("m/") && cell.label().ends_with("/trt"));
        assert!(pick_cell(&recs, Some("zz")).is_err());
    }

    #[test]
    fn degenerate_data_draws_or_says_none_without_panicking() {
        let mut single = ok("m", Precision::Fp16, 1, Runtime::Trt, 0.0);
        let mut nan = ok("m", Precision::Fp32, 2, Runtime::TractCuda, f64::NAN);
        if let Some(m) = nan.metrics.as_mut() {
            m.monitor
                .iter_mut()
                .for_each(|s| s.power_w = Some(f64::NAN));
            m.accuracy = None;
        }
        if let Some(m) = single.metrics.as_mut() {
            m.monitor.truncate(1);
            m.samples_per_s = 0.0;
        }
        let fail = failed("m", Precision::Int8, 8, Runtime::Trt, FailureKind::Oom);
        for cells in [
            vec![],
            vec![&fail],
            vec![&single],
            vec![&nan],
            vec![&single, &nan, &fail],
        ] {
            let _ = all(&cells);
        }
        assert!(throughput("m", &[&fail]).is_none());
        assert!(monitor(&fail).is_none());
        assert!(throughput("m", &[&single]).is_some());
        assert!(monitor(&single).is_some());
    }
}
