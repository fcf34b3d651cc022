//! Writes a transformer encoder in the form `torch.onnx.export` gives BERT-style layers (the
//! test encoder of `trtkit::onnx::test_models::encoder`, with a padding mask), for the
//! transformer fusion's benchmarks on machines without PyTorch:
//!
//!     cargo run --example encoder_model -- OUT.onnx [small|distilbert] [fused]
//!
//! `distilbert` (the default) has DistilBERT's sizes: six layers, twelve heads, hidden 768,
//! feed-forward 3072; `small` two layers, four heads, hidden 64. Inputs: float `hidden`
//! `[batch, seq, hidden]` and int64 `attention_mask` `[batch, seq]`. `fused` writes the graph
//! after the transformer fusion pass, as ONNX Runtime gets it (float32).

use trtkit::onnx::rewrite::pass::Pass;
use trtkit::onnx::rewrite::transformer_fusion::TransformerFusion;
use trtkit::onnx::test_models::{encoder, EncoderSize, EncoderStyle};
use trtkit::onnx::OnnxModel;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(out), size) = (args.next(), args.next()) else {
        eprintln!("usage: encoder_model OUT.onnx [small|distilbert]");
        std::process::exit(2);
    };
    let size = match size.as_deref() {
        None | Some("distilbert") => EncoderSize::distilbert(),
        Some("small") => EncoderSize::default(),
        Some(other) => {
            eprintln!("encoder_model: unknown size '{other}' (small or distilbert)");
            std::process::exit(2);
        }
    };
    let style = EncoderStyle {
        mask: true,
        size,
        ..Default::default()
    };
    let path = std::path::PathBuf::from(&out);
    let mut model = OnnxModel::from_proto(encoder(style), &path);
    if args.next().as_deref() == Some("fused") {
        let pass = TransformerFusion { float16: false };
        model = match pass.run(model) {
            Ok((fused, _)) => fused,
            Err(e) => {
                eprintln!("encoder_model: {e:#}");
                std::process::exit(1);
            }
        };
    }
    if let Err(e) = model.save(&path) {
        eprintln!("encoder_model: {e:#}");
        std::process::exit(1);
    }
    println!("{out}");
}
