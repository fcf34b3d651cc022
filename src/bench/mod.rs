//! The benchmark matrix: models × precisions × batch sizes × targets, each cell run as a child
//! `trtkit` process with a time limit, its result or its failure appended to a journal, so the
//! run survives any cell and resumes where it stopped.
//!
//! - [`plan`]: the matrix from flags or a TOML file, and its cells.
//! - [`dims`]: the plan's swept named axes, checked against the models.
//! - [`key`]: what makes two cells the same (the resume key).
//! - [`record`] and [`journal`]: the journal lines and the file they go to.
//! - [`prepare`]: the file a cell runs (the model, its FP16/INT8 rewrite, or an engine).
//! - [`cell`]: one cell, measured inside the child process.
//! - [`monitor`]: NVML power, utilisation, clocks and memory, sampled through a cell.
//! - [`supervise`]: the child process, its time limit, and what its end means.
//! - [`watchdog`]: the child's side of it: a cell ends when its `bench` does.
//! - [`lock`]: one `bench` run (and the cells it started) per results folder at a time.
//! - [`matrix`]: the `bench` job over every missing cell.

pub mod cell;
pub mod devices;
pub mod dims;
pub mod journal;
pub mod key;
pub mod lanes;
pub mod lock;
pub mod matrix;
pub mod monitor;
pub mod plan;
pub mod prepare;
pub mod record;
pub mod slurm;
pub mod slurm_follow;
pub mod supervise;
pub mod target;
pub mod watchdog;
