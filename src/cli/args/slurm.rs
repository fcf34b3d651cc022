//! `--slurm` and what the job array asks SLURM for (`bench`'s cluster flags).

use crate::bench::slurm::SlurmOptions;
use crate::number;
use clap::Args;

/// Flags of `bench --slurm`.
#[derive(Clone, Debug, Default, Args)]
pub struct SlurmArgs {
    /// Submit the missing cells as a SLURM job array (one task per cell, each into its own
    /// journal) and follow it to its end; run again to submit only what is still missing.
    #[arg(long, conflicts_with_all = ["cell", "print_cells", "devices"])]
    pub slurm: bool,
    /// The array's partition.
    #[arg(long, value_name = "P", requires = "slurm")]
    pub(crate) partition: Option<String>,
    /// Resources per task, as sbatch takes them (e.g. gpu:1).
    #[arg(long, value_name = "GRES", requires = "slurm")]
    pub(crate) gres: Option<String>,
    /// Time limit per task, as sbatch takes it (e.g. 00:30:00).
    #[arg(long, value_name = "T", requires = "slurm")]
    pub time: Option<String>,
    /// Let SLURM run a task again after a node failure or preemption.
    #[arg(long, requires = "slurm")]
    pub(crate) requeue: bool,
    /// Another sbatch option for the array (repeatable), e.g. --sbatch=--account=ml.
    #[arg(
        long,
        value_name = "OPTION",
        allow_hyphen_values = true,
        requires = "slurm"
    )]
    pub(crate) sbatch: Vec<String>,
    /// Print the sbatch script and submit nothing.
    #[arg(long, requires = "slurm")]
    pub(crate) dry_run: bool,
    /// Seconds between two looks at the queue while following the array.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 2.0,
        requires = "slurm",
        value_parser = number::seconds
    )]
    pub poll: f64,
}

impl SlurmArgs {
    /// What the array asks SLURM for.
    pub fn options(&self) -> SlurmOptions {
        SlurmOptions {
            partition: self.partition.clone(),
            gres: self.gres.clone(),
            time: self.time.clone(),
            requeue: self.requeue,
            extra: self.sbatch.clone(),
        }
    }
}

/// Flags that only say where and how cells are scheduled: a cell's own command line leaves them
/// out. Switches, then flags that take a value.
pub(crate) const SCHEDULING_SWITCHES: &[&str] = &[
    "--slurm",
    "--requeue",
    "--dry-run",
    "--print-cells",
    "--retry-failed",
];

/// Scheduling flags followed by a value.
pub(crate) const SCHEDULING_VALUED: &[&str] = &[
    "--partition",
    "--gres",
    "--time",
    "--sbatch",
    "--poll",
    "--devices",
    "--cpu-cells",
];

/// `argv` without the scheduling flags (as `--flag value` or `--flag=value`).
pub(crate) fn without_scheduling_flags(argv: &[String]) -> Vec<String> {
    let mut out = vec![];
    let mut skip_value = false;
    for word in argv {
        if skip_value {
            skip_value = false;
            continue;
        }
        let name = word.split('=').next().unwrap_or(word);
        if SCHEDULING_SWITCHES.contains(&word.as_str()) {
            continue;
        }
        if SCHEDULING_VALUED.contains(&name) {
            skip_value = !word.contains('=');
            continue;
        }
        out.push(word.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_command_leaves_the_scheduling_flags_out() {
        let argv: Vec<String> = "trtkit bench p.toml --slurm --partition gpu --gres=gpu:1 --time 1:00 --requeue --sbatch=--account=ml --sbatch --qos=low --devices all --cpu-cells 2 --duration 3 --name r"
            .split(' ')
            .map(String::from)
            .collect();
        assert_eq!(
            without_scheduling_flags(&argv).join(" "),
            "trtkit bench p.toml --duration 3 --name r"
        );
    }
}
