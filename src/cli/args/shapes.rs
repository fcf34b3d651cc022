//! The shape flags of every command that opens an ONNX model: `--input-shape` (per input) and
//! `--dim NAME=…` (a named axis, for every input that carries it). Each command takes from them
//! what it can use: one size per axis (`compare`, `calibrate`), a list to sweep (`run`,
//! `bench`) or a profile range (`build`).

use crate::cli::usage;
use crate::onnx::shape::{
    parse_dim_ranges, parse_input_shapes, DimRange, DimSweep, DimValues, InputShape, NamedDim,
    ShapeRequest,
};
use clap::Args;

/// `--input-shape` and `--dim`.
#[derive(Clone, Debug, Default, Args)]
pub struct ShapeArgs {
    /// Input shapes: `-1 3 224 224` for a one-input model, or named, `input_ids:-1x128
    /// attention_mask:-1x128` (`-1` keeps an axis dynamic; a dynamic batch axis follows
    /// --batch-size).
    #[arg(long = "input-shape", num_args = 1.., allow_negative_numbers = true, value_name = "DIMS")]
    pub input_shape: Vec<String>,
    /// Size of an axis of the model, named by the model's name for it (`--dim seq=128`, for
    /// every input that has it) or by input and index (`--dim x:3=320`, also for an axis the
    /// model leaves unnamed). `run` and `bench` sweep a list (`seq=64,128,256,512`); `build`
    /// also takes a profile range (`seq=16:128:512`, min:opt:max). Several per flag
    /// (`--dim a=1 b=2`) or repeated.
    #[arg(long = "dim", value_name = "NAME=SIZE")]
    pub dim: Vec<String>,
}

impl ShapeArgs {
    /// The `--input-shape` values, parsed.
    pub fn input_shapes(&self) -> anyhow::Result<Vec<InputShape>> {
        parse_input_shapes(&self.input_shape).map_err(usage)
    }

    /// The `--dim` values, parsed.
    pub fn dims(&self) -> anyhow::Result<Vec<DimRange>> {
        parse_dim_ranges(&self.dim).map_err(|e| usage(format!("--dim: {e:#}")))
    }

    /// For a command that runs at one shape: each `--dim` must give a single size.
    pub(crate) fn one_shape(&self, command: &str) -> anyhow::Result<ShapeRequest> {
        let (request, sweep) = self.sweep()?;
        if let Some((symbol, sizes)) = sweep.iter().find(|(_, s)| s.len() > 1) {
            return Err(usage(format!(
                "--dim {symbol}: `{command}` runs at one size per axis, not {} (`run` and `bench` sweep lists)",
                sizes.len()
            )));
        }
        Ok(request.with_dims(&first_sizes(&sweep)))
    }

    /// For a command that sweeps: the input shapes, and each named axis with its sizes.
    pub(crate) fn sweep(&self) -> anyhow::Result<(ShapeRequest, DimSweep)> {
        let mut sweep = vec![];
        for d in self.dims()? {
            match d.values {
                DimValues::Sizes(sizes) => sweep.push((d.symbol, sizes)),
                DimValues::Range { .. } => {
                    return Err(usage(format!(
                        "--dim {}: a min:opt:max range makes an engine profile (`build`); give sizes here, e.g. {}=128",
                        d.symbol, d.symbol
                    )))
                }
            }
        }
        Ok((ShapeRequest::shapes(self.input_shapes()?), sweep))
    }
}

/// The command line with every value after a `--dim` given its own `--dim`, so that
/// `--dim a=1 b=2` reads as `--dim a=1 --dim b=2`: a value is a `NAME=…` word that is neither
/// a flag nor an existing file, and the first word that is not one (a model path) stays a
/// positional argument wherever it stands.
pub fn spread_dim_values<I>(args: I) -> Vec<std::ffi::OsString>
where
    I: IntoIterator,
    I::Item: Into<std::ffi::OsString>,
{
    let mut out: Vec<std::ffi::OsString> = vec![];
    let mut args = args.into_iter().map(Into::into);
    let mut after_dim = false;
    while let Some(arg) = args.next() {
        let text = arg.to_str().unwrap_or("").to_string();
        if text == "--" {
            // Everything after `--` is positional, as given.
            out.push(arg);
            out.extend(args);
            break;
        }
        let is_value = after_dim
            && !text.starts_with('-')
            && text.contains('=')
            && !std::path::Path::new(&text).exists();
        if is_value {
            out.push("--dim".into());
            out.push(arg);
            continue;
        }
        after_dim = text == "--dim" || text.starts_with("--dim=");
        out.push(arg);
        if text == "--dim" {
            // Its own value, whatever it is.
            out.extend(args.next());
        }
    }
    out
}

/// The first size of each swept axis.
fn first_sizes(sweep: &[(String, Vec<i64>)]) -> Vec<NamedDim> {
    sweep
        .iter()
        .map(|(symbol, sizes)| NamedDim {
            symbol: symbol.clone(),
            size: sizes[0],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        shapes: ShapeArgs,
        #[arg(long)]
        save_inputs: Option<String>,
    }

    fn parse(args: &[&str]) -> Wrap {
        Wrap::try_parse_from(std::iter::once("x").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn the_flag_after_input_shape_stays_a_flag() {
        let w = parse(&[
            "--input-shape",
            "input_ids:-1x16",
            "attention_mask:-1x16",
            "--save-inputs",
            "f.npz",
        ]);
        assert_eq!(w.shapes.input_shape.len(), 2);
        assert_eq!(w.save_inputs.as_deref(), Some("f.npz"));
        let w = parse(&["--input-shape", "-1", "3", "224", "224", "--dim", "seq=8"]);
        assert_eq!(w.shapes.input_shape, ["-1", "3", "224", "224"]);
        assert_eq!(w.shapes.dim, ["seq=8"]);
    }

    /// [`parse`] after the spreading the binary does.
    fn parse_spread(args: &[&str]) -> Wrap {
        let all = spread_dim_values(std::iter::once("x").chain(args.iter().copied()));
        Wrap::try_parse_from(all).unwrap()
    }

    #[test]
    fn dim_takes_several_values_and_leaves_flags_and_models_alone() {
        let w = parse_spread(&["--dim", "a=1", "x:3=160,320", "--save-inputs", "f.npz"]);
        assert_eq!(w.shapes.dim, ["a=1", "x:3=160,320"]);
        assert_eq!(w.save_inputs.as_deref(), Some("f.npz"));
        let w = parse_spread(&["--dim=a=1", "b=2", "--dim", "c=3"]);
        assert_eq!(w.shapes.dim, ["a=1", "b=2", "c=3"]);
        // A word without `=` (a model path) stays where it is, for the positional argument.
        let spread = spread_dim_values(["trtkit", "run", "--dim", "seq=8", "model.onnx"]);
        assert_eq!(spread, ["trtkit", "run", "--dim", "seq=8", "model.onnx"]);
        let spread = spread_dim_values(["t", "--dim", "a=1", "b=2", "--", "c=3"]);
        assert_eq!(spread, ["t", "--dim", "a=1", "--dim", "b=2", "--", "c=3"]);
        // An existing file whose name has `=` in it is a path, not a size.
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("lr=0.1.onnx");
        std::fs::write(&odd, b"").unwrap();
        let odd = odd.to_str().unwrap();
        let spread = spread_dim_values(["t", "--dim", "a=1", odd]);
        assert_eq!(spread, ["t", "--dim", "a=1", odd]);
    }

    #[test]
    fn sweeps_lists_and_refuses_them_where_one_size_runs() {
        let w = parse(&["--dim", "seq=16,64", "--dim", "heads=2"]);
        let (req, sweep) = w.shapes.sweep().unwrap();
        assert!(req.is_empty());
        assert_eq!(sweep[0], ("seq".to_string(), vec![16, 64]));
        let err = w.shapes.one_shape("compare").unwrap_err().to_string();
        assert!(err.contains("--dim seq") && err.contains("not 2"), "{err}");
        let one = parse(&["--dim", "seq=16"])
            .shapes
            .one_shape("compare")
            .unwrap();
        assert_eq!(one.dims[0].size, 16);
        let range = parse(&["--dim", "seq=1:8:16"]);
        let err = range.shapes.sweep().unwrap_err().to_string();
        assert!(err.contains("build"), "{err}");
        for bad in ["seq", "=4", "seq=0", "seq=4:2:8", "seq=1:2"] {
            let err = parse(&["--dim", bad])
                .shapes
                .dims()
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("--dim: dim '"), "{bad}: {err}");
        }
    }
}
