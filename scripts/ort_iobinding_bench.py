#!/usr/bin/env python3
"""ONNX Runtime's own Python I/O-binding loop, used as a throughput anchor.

For every ONNX model and every batch size given, this script creates an
onnxruntime.InferenceSession on the CUDA execution provider (exhaustive cuDNN
algorithm search, optional NHWC layout), places random inputs on the GPU once
as OrtValues, learns the output shapes with one run and then pre-allocates and
binds device outputs. It warms up, then times `--iterations` calls of
`session.run_with_iobinding(io)` with wall clock (time.perf_counter) around the
whole loop. By default every call synchronizes the execution provider, which is
exactly what ONNX Runtime's Python loop does; `--no-sync` disables that per run
and synchronizes the outputs once after the loop instead.

Input shapes, names and dtypes are read from session.get_inputs(): axis 0 of
symbolic dims becomes the batch, other symbolic axes become `--seq`. int64
inputs get random ints in [0, 1000) (all ones when the name contains 'mask'),
float inputs get uniform [0, 1) values from a seeded generator.

One JSON line per (model, batch) goes to stdout, a readable line to stderr.

Run (on a machine with an NVIDIA GPU and onnxruntime-gpu):
    python3 scripts/ort_iobinding_bench.py onnx/resnet50.onnx \
        --batch-sizes 1,32,256 --iterations 200 [--nhwc] [--no-sync]
"""
import argparse
import json
import os
import sys
import time

ORT_TO_NUMPY = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="+", help="ONNX model paths (dynamic batch axis)")
    p.add_argument("--batch-sizes", default="1,32,256",
                   help="comma-separated batch sizes (default: 1,32,256)")
    p.add_argument("--seq", type=int, default=128,
                   help="value for non-batch symbolic axes (default: 128)")
    p.add_argument("--warmup", type=int, default=20, help="warm-up runs (default: 20)")
    p.add_argument("--iterations", type=int, default=200,
                   help="timed runs (default: 200)")
    p.add_argument("--nhwc", action="store_true",
                   help="set the CUDA provider option prefer_nhwc=1")
    p.add_argument("--no-sync", action="store_true",
                   help="disable per-run EP synchronization; sync outputs once after the loop")
    p.add_argument("--seed", type=int, default=0, help="RNG seed for inputs (default: 0)")
    args = p.parse_args(argv)
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    return args


def concrete_shape(shape, batch, seq):
    dims = []
    for axis, d in enumerate(shape):
        if isinstance(d, int) and d > 0:
            dims.append(d)
        else:
            dims.append(batch if axis == 0 else seq)
    return dims


def make_input(np, rng, meta, batch, seq):
    shape = concrete_shape(meta.shape, batch, seq)
    dtype = ORT_TO_NUMPY.get(meta.type)
    if dtype is None:
        raise SystemExit(f"unsupported input type {meta.type} for input {meta.name}")
    if dtype in ("int64", "int32", "int8", "uint8"):
        if "mask" in meta.name.lower():
            return np.ones(shape, dtype=dtype)
        return rng.integers(0, 1000 if dtype in ("int64", "int32") else 100,
                            size=shape).astype(dtype)
    if dtype == "bool":
        return np.ones(shape, dtype=bool)
    return rng.random(shape, dtype=np.float32).astype(dtype)


def bench_one(ort, np, args, model, batch):
    providers = [("CUDAExecutionProvider", {
        "device_id": 0,
        "cudnn_conv_algo_search": "EXHAUSTIVE",
        "prefer_nhwc": "1" if args.nhwc else "0",
    })]
    sess = ort.InferenceSession(model, providers=providers)
    rng = np.random.default_rng(args.seed)
    io = sess.io_binding()

    # Inputs live on the device for the whole measurement.
    inputs = {}
    for meta in sess.get_inputs():
        arr = make_input(np, rng, meta, batch, args.seq)
        inputs[meta.name] = ort.OrtValue.ortvalue_from_numpy(arr, "cuda", 0)
        io.bind_ortvalue_input(meta.name, inputs[meta.name])

    # One run with ORT-allocated device outputs to learn their shapes/dtypes.
    out_names = [o.name for o in sess.get_outputs()]
    for name in out_names:
        io.bind_output(name, "cuda")
    sess.run_with_iobinding(io)
    learned = io.get_outputs()
    io.clear_binding_outputs()
    outputs = {}
    for name, val in zip(out_names, learned):
        dtype = ORT_TO_NUMPY[val.data_type()]
        outputs[name] = ort.OrtValue.ortvalue_from_shape_and_type(
            val.shape(), np.dtype(dtype), "cuda", 0)
        io.bind_ortvalue_output(name, outputs[name])
    del learned

    run_opts = None
    if args.no_sync:
        run_opts = ort.RunOptions()
        run_opts.add_run_config_entry("disable_synchronize_execution_providers", "1")

    for _ in range(args.warmup):
        sess.run_with_iobinding(io, run_opts)
    io.synchronize_outputs()

    t0 = time.perf_counter()
    for _ in range(args.iterations):
        sess.run_with_iobinding(io, run_opts)
    if args.no_sync:
        io.synchronize_outputs()
    seconds = time.perf_counter() - t0

    return {
        "model": os.path.basename(model),
        "batch": batch,
        "iterations": args.iterations,
        "seconds": seconds,
        "samples_per_s": batch * args.iterations / seconds,
        "ms_per_iter": seconds * 1000.0 / args.iterations,
        "nhwc": bool(args.nhwc),
        "no_sync": bool(args.no_sync),
        "provider": sess.get_providers()[0],
        "ort_version": ort.__version__,
    }


def main(argv=None):
    args = parse_args(argv)
    import numpy as np
    import onnxruntime as ort

    for model in args.models:
        for batch in args.batch_sizes:
            rec = bench_one(ort, np, args, model, batch)
            print(json.dumps(rec), flush=True)
            print(f"{rec['model']} batch={batch} nhwc={rec['nhwc']} "
                  f"sync={'off' if args.no_sync else 'on'}: "
                  f"{rec['samples_per_s']:.1f} samples/s, "
                  f"{rec['ms_per_iter']:.3f} ms/iter ({rec['provider']}, "
                  f"ort {rec['ort_version']})", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
