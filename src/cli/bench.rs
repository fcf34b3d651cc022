//! `trtkit bench`: the matrix from flags or a TOML plan (flags win), every missing cell in its
//! own process, resumable; `--print-cells` lists the missing cells as commands for a
//! scheduler, `--cell` runs one. `bench-cell` (hidden) is what each child process runs.

use crate::bench::matrix::{bench, Matrix};
use crate::bench::plan::{CellSpec, Plan, PlanFile, SettingFlags};
use crate::bench::record::CellRecord;
use crate::bench::slurm::shell_word;
use crate::bench::slurm_follow::{bench_slurm, SlurmOutcome, SlurmRequest};
use crate::bench::supervise::run_in_child;
use crate::cli::args::output::JsonArgs;
use crate::cli::args::preprocess::PreprocessArgs;
use crate::cli::args::shapes::ShapeArgs;
use crate::cli::args::slurm::{without_scheduling_flags, SlurmArgs};
use crate::cli::stdout::{self, failed, FirstFailure};
use crate::cli::usage;
use crate::data::preprocess::PreprocessRequest;
use crate::report::bench_run::{cell_line, render};
use crate::report::progress::Bar;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

/// `trtkit bench` flags: each is also a field of the plan file.
#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// A TOML plan with the same fields as the flags (models, precisions, batch_sizes, …).
    pub plan: Option<PathBuf>,
    /// The plan-file keys that have a flag of their own (`--models`, `--warmup`, …).
    #[command(flatten)]
    pub settings: SettingFlags,
    /// Input shapes and named axes: `--dim seq=64,128,256,512` makes the axis a matrix axis
    /// (one table column per size) for every model whose inputs carry it.
    #[command(flatten)]
    pub shapes: ShapeArgs,
    /// Run again the cells the journal records as failed.
    #[arg(long)]
    pub(crate) retry_failed: bool,
    /// Print each missing cell as one command (for a Slurm array or a CI matrix) and run nothing.
    #[arg(long, conflicts_with = "cell")]
    pub(crate) print_cells: bool,
    /// Run only this cell (`model/precision/bBATCH/target`, with `/seq=128` after the batch for a
    /// swept axis, as --print-cells names it), into its own journal file beside the run's.
    #[arg(long, value_name = "CELL")]
    pub cell: Option<String>,
    /// Run the cells as a SLURM job array.
    #[command(flatten)]
    pub cluster: SlurmArgs,
    /// How dataset and calibration images become model input (`validate`'s flags; over the
    /// plan's `[preprocess]` table; part of every cell's key).
    #[command(flatten)]
    pub preprocess: PreprocessArgs,
    /// Output format.
    #[command(flatten)]
    pub format: JsonArgs,
}

impl BenchArgs {
    /// The plan fields the flags set.
    fn plan_fields(&self) -> Result<PlanFile> {
        let preprocess = self.preprocess.request()?;
        let (_, sweep) = self.shapes.sweep()?;
        Ok(PlanFile {
            input_shapes: (!self.shapes.input_shape.is_empty())
                .then(|| self.shapes.input_shape.clone()),
            dims: (!sweep.is_empty()).then(|| sweep.into_iter().collect()),
            preprocess: (preprocess != PreprocessRequest::default()).then_some(preprocess),
            ..self.settings.plan_file()
        })
    }
}

/// The checked plan: the plan file (if any) under the flags; an error names the file.
pub fn plan(args: &BenchArgs) -> Result<Plan> {
    let base = match &args.plan {
        Some(p) => PlanFile::load(p).map_err(usage)?,
        None => PlanFile::default(),
    };
    // A value the plan file and the flags together make wrong is said with the file's name.
    Plan::from_file(base.overridden_by(args.plan_fields()?)).map_err(|e| match &args.plan {
        Some(p) => usage(format!("{} (with the flags over it): {e:#}", p.display())),
        None => usage(e),
    })
}

/// This command line without its scheduling flags: what runs one cell (with `--cell` after it).
fn cell_command_words() -> Vec<String> {
    let argv: Vec<String> = std::env::args().collect();
    without_scheduling_flags(&argv)
}

/// The command that runs one cell, for a shell.
fn cell_command(cell: &CellSpec) -> String {
    let mut words: Vec<String> = cell_command_words().iter().map(|a| shell_word(a)).collect();
    words.push("--cell".into());
    words.push(shell_word(&cell.label()));
    words.join(" ")
}

/// `bench --slurm`: the array's script, or the array submitted and followed.
fn run_slurm(args: &BenchArgs, plan: &Plan) -> Result<()> {
    let mut command = cell_command_words();
    // The tasks run on other machines: trtkit by its full path.
    if let Ok(exe) = std::env::current_exe() {
        command[0] = exe.display().to_string();
    }
    let request = SlurmRequest {
        options: args.cluster.options(),
        command,
        dry_run: args.cluster.dry_run,
        poll_s: args.cluster.poll,
    };
    let bar = Bar::new("cells", args.format.json);
    let quiet = args.format.json;
    let printed = FirstFailure::default();
    let on_record = |r: &CellRecord| {
        if !quiet {
            printed.keep(bar.println(&cell_line(&r.label(), r)).map_err(failed));
        }
    };
    let outcome = bench_slurm(plan, args.retry_failed, &request, &bar, &on_record)?;
    printed.check()?;
    match outcome {
        SlurmOutcome::Script(script) => stdout::print(&script),
        SlurmOutcome::Ran(report) => args.format.print(&report, || render(&report)),
    }
}

/// Runs `bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    let plan = plan(&args)?;
    if args.print_cells {
        let matrix = Matrix::expand(&plan, args.retry_failed)?;
        for cell in matrix.missing() {
            stdout::println(&cell_command(cell))?;
        }
        return Ok(());
    }
    if args.cluster.slurm {
        return run_slurm(&args, &plan);
    }
    let bar = Bar::new("cells", args.format.json);
    let quiet = args.format.json;
    let printed = FirstFailure::default();
    let on_record = |r: &CellRecord| {
        if !quiet {
            printed.keep(bar.println(&cell_line(&r.label(), r)).map_err(failed));
        }
    };
    let report = bench(
        &plan,
        args.retry_failed,
        args.cell.as_deref(),
        &bar,
        &on_record,
    )?;
    printed.check()?;
    args.format.print(&report, || render(&report))?;
    // One cell run by a scheduler: its failure is the task's, so the scheduler's accounts show it.
    match (&args.cell, report.failures.first()) {
        (Some(_), Some(failure)) => anyhow::bail!("the cell failed: {failure}"),
        _ => Ok(()),
    }
}

/// `trtkit bench-cell`: what a cell's child process runs (not for people).
#[derive(Clone, Debug, Args)]
pub struct CellArgs {
    /// The cell (JSON, written by the parent).
    #[arg(long)]
    pub spec: PathBuf,
    /// Where its metrics go (JSON).
    #[arg(long)]
    pub result: PathBuf,
}

/// Runs one cell in this process and writes its metrics.
pub(crate) fn run_one(args: CellArgs) -> Result<()> {
    run_in_child(&args.spec, &args.result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::select::Runtime;

    #[test]
    fn words_are_quoted_only_when_a_shell_needs_it() {
        assert_eq!(shell_word("results/a-b_1.onnx"), "results/a-b_1.onnx");
        assert_eq!(shell_word("my model.onnx"), "'my model.onnx'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }

    /// `bench` takes `validate`'s preprocessing flags; they lie over a plan's `[preprocess]`
    /// table setting by setting, reach every cell, and change the cells' key.
    #[test]
    fn preprocessing_flags_lie_over_the_plan_and_key_the_cells() {
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let dir = tempfile::tempdir().unwrap();
        let plan_file = dir.path().join("p.toml");
        let model = dir.path().join("m.onnx");
        crate::onnx::OnnxModel::from_proto(crate::onnx::test_models::classifier(None), &model)
            .save(&model)
            .unwrap();
        std::fs::write(
            &plan_file,
            "models = [\"m.onnx\"]\nprecisions = [\"fp32\"]\nbatch_sizes = [1]\ntargets = [\"tract-cpu\"]\n[preprocess]\nresize = 0\nstd = [0.5, 0.5, 0.5]\n",
        )
        .unwrap();
        let plan_with = |flags: &[&str]| {
            let mut argv = vec!["bench", plan_file.to_str().unwrap()];
            argv.extend(flags);
            plan(&<Command as clap::Parser>::parse_from(argv).bench).unwrap()
        };
        let from_file = plan_with(&[]);
        assert_eq!(from_file.settings.preprocess.resize, Some(0));
        assert_eq!(from_file.settings.preprocess.mean, None);
        let flagged = plan_with(&["--mean", "0.5,0.5,0.5"]);
        let p = &flagged.settings.preprocess;
        assert_eq!(
            (p.resize, p.mean, p.std),
            (Some(0), Some([0.5; 3]), Some([0.5; 3]))
        );
        assert_ne!(
            from_file.settings.digest(Runtime::Trt),
            flagged.settings.digest(Runtime::Trt),
            "another preprocessing is another cell"
        );
        let argv = ["bench", plan_file.to_str().unwrap(), "--std", "1,2"];
        let err = plan(&<Command as clap::Parser>::parse_from(argv).bench).unwrap_err();
        assert!(
            format!("{err:#}").contains("--std needs three values"),
            "{err:#}"
        );
    }

    /// `--dim` sweeps the models whose inputs carry the axis (a flag replaces the plan's sizes
    /// of that axis only), each size a cell; a model without the axis keeps one cell per batch;
    /// an axis no model has, the batch axis, or a profile range are one-line errors.
    #[test]
    fn a_swept_axis_multiplies_the_cells_of_the_models_that_carry_it() {
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let dir = tempfile::tempdir().unwrap();
        let save = |name: &str, proto| {
            let path = dir.path().join(name);
            crate::onnx::OnnxModel::from_proto(proto, &path)
                .save(&path)
                .unwrap();
        };
        save("bert.onnx", crate::onnx::test_models::token_classifier());
        save("net.onnx", crate::onnx::test_models::classifier(None));
        let plan_file = dir.path().join("p.toml");
        std::fs::write(
            &plan_file,
            "models = [\"bert.onnx\", \"net.onnx\"]\nprecisions = [\"fp32\"]\nbatch_sizes = [1]\ntargets = [\"ort-cpu\"]\n[dims]\nseq = [128, 64, 64]\nother = [2]\n",
        )
        .unwrap();
        let plan_with = |flags: &[&str]| {
            let mut argv = vec!["bench", plan_file.to_str().unwrap()];
            argv.extend(flags);
            plan(&<Command as clap::Parser>::parse_from(argv).bench)
        };
        let err = plan_with(&[]).unwrap_err().to_string();
        assert!(
            err.contains("no model of the plan has an input axis named 'other'")
                && err.contains("batch, seq"),
            "{err}"
        );
        std::fs::write(
            &plan_file,
            "models = [\"bert.onnx\", \"net.onnx\"]\nprecisions = [\"fp32\"]\nbatch_sizes = [1]\ntargets = [\"ort-cpu\"]\n[dims]\nseq = [128, 64, 64]\n",
        )
        .unwrap();
        let from_file = plan_with(&[]).unwrap();
        let labels = |p: &Plan| -> Vec<String> {
            let hashes = vec!["ab".repeat(32), "cd".repeat(32)];
            p.cells(&hashes, "none").iter().map(|c| c.label()).collect()
        };
        assert_eq!(
            labels(&from_file),
            [
                "bert/fp32/b1/seq=64/ort-cpu",
                "bert/fp32/b1/seq=128/ort-cpu",
                "net/fp32/b1/ort-cpu"
            ]
        );
        assert_eq!(from_file.settings.dim_max["seq"], 128);
        let flagged = plan_with(&["--dim", "seq=16,32,512"]).unwrap();
        assert_eq!(labels(&flagged).len(), 4);
        assert_eq!(flagged.settings.dim_max["seq"], 512);
        assert_ne!(
            from_file.settings.digest(Runtime::Trt),
            flagged.settings.digest(Runtime::Trt)
        );
        for (flag, needle) in [
            ("batch=1,2", "sweep it with --batch-sizes"),
            (
                "seq=16:64:128",
                "a min:opt:max range makes an engine profile",
            ),
            ("seq=0", "--dim"),
        ] {
            let err = format!("{:#}", plan_with(&["--dim", flag]).unwrap_err());
            assert!(err.contains(needle), "{flag}: {err}");
        }
    }
}
