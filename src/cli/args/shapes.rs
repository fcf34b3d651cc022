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
    /// Size of a named axis of the model, for every input that has it: `--dim seq=128`. `run`
    /// and `bench` sweep a list (`seq=64,128,256,512`); `build` also takes a profile range
    /// (`seq=16:128:512`, min:opt:max). Repeatable, one axis each.
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
