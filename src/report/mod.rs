//! Presenting results: terminal and markdown tables, CSV, human-readable sizes and JSON. One
//! module per kind of report, named for what it renders, each taking the library job's report
//! (live, or read back from a saved JSON report): `latency` (`run`), `accuracy` (`validate`),
//! `closeness` (`compare`), `layerwise` (`compare --layerwise`, its table and SVG plot), `calibration` (`calibrate`), `build`, `inspect`, `doctor`,
//! `quantize` and `int8` (`quantize`), `precisions` (`validate` and `compare` over a workspace's
//! precisions), `workspace` (`init`) and `bench_run` (`bench`). For `report`: `bench` renders a
//! bench journal's tables (its metrics listed in `bench_metrics`), `plots` its SVG plots (on the
//! axes of `plot_scale`) and `html` the page; `job` is the `report` job itself (it reads the
//! journals and writes the page). `format` and `table` are the pieces they share; `progress`
//! draws the long jobs' progress bars on stderr. Nothing here prints results or knows about
//! flags (the two exports, per-iteration times and per-image predictions, and the HTML page are
//! written atomically).

pub mod accuracy;
pub mod bench;
pub mod bench_metrics;
pub mod bench_run;
pub mod build;
pub mod calibration;
pub mod closeness;
pub mod doctor;
pub mod format;
pub mod html;
pub mod inspect;
pub mod int8;
pub mod job;
pub mod latency;
pub mod layerwise;
pub mod plot_scale;
pub mod plots;
pub mod precisions;
pub mod progress;
pub mod quantize;
pub mod table;
pub mod task;
pub mod workspace;
