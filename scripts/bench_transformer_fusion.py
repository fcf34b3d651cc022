#!/usr/bin/env python3
"""What trtkit's transformer fusion buys on ONNX Runtime: `trtkit run` of the same model with
`--transformer-fusion off` (the exported graph as it is) and `on`, alternating, in one run; and,
with --peer, the graph ONNX Runtime's own Python transformers optimizer writes, run as it is.

For each model and point it prints the samples/s of each variant (median over --rounds) and the
fused/unfused ratio:

    python3 scripts/bench_transformer_fusion.py --trtkit target/release/trtkit \\
        --model /tmp/distilbert.onnx --batch-sizes 1 --seqs 128 --rounds 3 --peer -- --threads 2

Arguments after `--` go to every `trtkit run` as they are (`--device cuda --cuda-graph`, ...).
A DistilBERT-sized model for machines without PyTorch: `cargo run --release --example
encoder_model -- /tmp/distilbert.onnx` (or scripts/export_token_model.py where PyTorch is).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(trtkit, model, batch, seq, fusion, extra, duration, seq_name="seq"):
    cmd = [trtkit, "run", model, "--backend", "ort", "--batch-size", str(batch),
           "--dim", f"{seq_name}={seq}", "--transformer-fusion", fusion, "--warmup", "3",
           "--duration", str(duration), "--json", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"  FAILED: {' '.join(cmd[2:])}: {done.stderr.strip().splitlines()[-1:]}", flush=True)
        return None, 0.0, []
    report = json.loads(done.stdout)
    point = report["results"][0]
    notes = [n for n in report["notes"] if "transformer fusion" in n]
    return point["throughput"], point.get("setup", {}).get("total_ms", 0.0), notes


def peer_model(model, out_dir):
    """The graph ONNX Runtime's Python transformers optimizer writes for `model` (BERT fusions)."""
    from onnxruntime.transformers import optimizer

    fused = optimizer.optimize_model(model, model_type="bert", num_heads=0, hidden_size=0, opt_level=0)
    path = os.path.join(out_dir, "peer_" + os.path.basename(model))
    fused.save_model_to_file(path)
    return path


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trtkit", required=True)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--batch-sizes", default="1")
    ap.add_argument("--seqs", default="128")
    ap.add_argument("--seq-name", default="seq", help="the models' sequence axis (default: seq)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--peer", action="store_true", help="also ONNX Runtime's Python optimizer's graph")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="fusion-bench-")
    for model in args.model:
        variants = {"unfused": (model, "off"), "trtkit fused": (model, "on")}
        if args.peer:
            variants["ORT optimizer"] = (peer_model(model, work), "off")
        for batch in map(int, args.batch_sizes.split(",")):
            for seq in map(int, args.seqs.split(",")):
                rates = {name: [] for name in variants}
                setups = {name: [] for name in variants}
                notes = []
                for _ in range(args.rounds):
                    for name, (path, fusion) in variants.items():
                        rate, setup, said = run(args.trtkit, path, batch, seq, fusion, extra, args.duration,
                                                   args.seq_name)
                        if rate is None:
                            continue
                        rates[name].append(rate)
                        setups[name].append(setup)
                        notes = notes or said
                base = statistics.median(rates["unfused"] or [float("nan")])
                print(f"{os.path.basename(model)} batch {batch} seq {seq}")
                for name in variants:
                    if not rates[name]:
                        print(f"  {name:<14} failed")
                        continue
                    med = statistics.median(rates[name])
                    print(f"  {name:<14} {med:10.2f} samples/s  ({', '.join(f'{r:.2f}' for r in rates[name])})"
                          f"  set-up {statistics.median(setups[name]) / 1e3:5.2f} s  x{med / base:5.2f}")
                for n in notes:
                    print(f"  note: {n}")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
