//! The benchmark matrix: models × precisions × batch sizes × targets, each cell run as a child
//! `trtkit` process with a time limit, its result or its failure appended to a journal, so the
//! run survives any cell and resumes where it stopped. Here live the plan, its settings (each
//! declared once: flag, plan-file key, default, place in the cell key) and its cells, what
//! makes two cells the same, the journal, the file each cell runs, the cell's measurement
//! inside its process, the GPU monitor sampled through it, the supervision of the child and its
//! watchdog, one run per results folder, the GPUs and lanes cells are spread over, and the
//! hand-off to SLURM.

pub mod cell;
pub mod devices;
pub mod dims;
pub mod journal;
pub mod key;
pub(crate) mod lanes;
pub mod lock;
pub mod matrix;
pub mod monitor;
pub mod plan;
pub mod prepare;
pub mod record;
pub mod settings;
pub mod slurm;
pub mod slurm_follow;
pub mod supervise;
pub(crate) mod watchdog;
