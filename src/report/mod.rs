//! Presenting results: terminal and markdown tables, CSV, SVG plots, the HTML page and JSON, one
//! module per kind of report, named for what it renders. Each takes a library job's report (live,
//! or read back from a saved JSON report) and turns it into text or a file; the `report` command's
//! own job (journals in, tables and the page out) lives here too, beside the number formatting,
//! tables and progress bars the others share. Nothing here prints results or knows about flags;
//! every file it writes (per-iteration times, per-image predictions, the HTML page) is written
//! atomically.

pub mod accuracy;
pub mod bench;
pub(crate) mod bench_metrics;
pub(crate) mod bench_run;
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
pub(crate) mod plot_scale;
pub mod plots;
pub mod precisions;
pub mod progress;
pub mod quantize;
pub(crate) mod search;
pub mod table;
pub mod task;
pub mod workspace;
