//! Presenting results: terminal and markdown tables, human-readable sizes, JSON output.

pub mod format;
pub mod table;
