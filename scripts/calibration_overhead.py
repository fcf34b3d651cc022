#!/usr/bin/env python3
"""What INT8 calibration costs over a plain run, on real models and real images, beside ONNX
Runtime's quantize_static on the same inputs, in one run on one machine.

For each --model, in alternating rounds:

- `trtkit calibrate MODEL --calib-data DIR --measure-plain --json` once per --backends entry:
  the calibration (decode, the model with its quantized tensors exposed, histograms, range
  search, cache) and the plain model over the same batches on the same backend, as
  calibrate's own report times them; `overhead` is its `timing.overhead_percent`. The process's
  wall time is printed too (it also holds the plain run).
- `onnxruntime.quantization.quantize_static` (QDQ, per channel) with each --ort-methods entry,
  timed end to end, over the very tensors trtkit fed: they are taken once, untimed, with
  `trtkit compare --dataset DIR --save-inputs` (trtkit's own preprocessing for the model), so
  ONNX Runtime is not charged for decoding the images and trtkit is.

    python3 scripts/calibration_overhead.py --trtkit target/release/trtkit --images DIR \\
        --model .cache/model-corpus/pplcnet-text-orientation.onnx --model .cache/model-corpus/open-nsfw.onnx

Needs numpy and onnxruntime (with its quantization tools) for the ONNX Runtime rows.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def timed(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
    return p.stdout, wall


def trtkit_row(args, model, backend, cache_dir):
    out, wall = timed([args.trtkit, "calibrate", model, "--calib-data", args.images,
                       "--num-samples", str(args.num_samples), "--batch-size", str(args.batch_size),
                       "--backend", backend, "--cache-dir", cache_dir, "--recalibrate",
                       "--measure-plain", "--json"])
    t = json.loads(out)["timing"]
    calibration_s = t["collect_wall_s"] + t["search_s"]
    return {"side": f"trtkit {backend}", "calibration_s": calibration_s,
            "plain_s": t["plain_wall_s"], "overhead_percent": t["overhead_percent"],
            "histogram_cpu_s": t["histogram_cpu_s"], "process_s": wall}


class Batches:
    """quantize_static's data reader over the saved inputs, batch by batch."""

    def __init__(self, arrays, batch):
        self.arrays, self.batch, self.at = arrays, batch, 0
        self.count = len(next(iter(arrays.values())))

    def get_next(self):
        if self.at >= self.count:
            return None
        end = min(self.at + self.batch, self.count)
        feed = {k: v[self.at:end] for k, v in self.arrays.items()}
        self.at = end
        return feed

    def rewind(self):
        self.at = 0


def ort_row(model, arrays, method, batch, work):
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, quantize_static
    out = os.path.join(work, f"qs-{method}.onnx")
    t0 = time.perf_counter()
    quantize_static(model, out, Batches(arrays, batch), quant_format=QuantFormat.QDQ,
                    per_channel=True, calibrate_method=getattr(CalibrationMethod, method))
    return {"side": f"ORT quantize_static {method}", "calibration_s": time.perf_counter() - t0}


def saved_inputs(args, model, work):
    path = os.path.join(work, "inputs.npz")
    timed([args.trtkit, "compare", model, model, "--dataset", args.images, "--num-samples",
           str(args.num_samples), "--batch-size", str(args.batch_size), "--save-inputs", path])
    with np.load(path) as d:
        return {k: d[k] for k in d.files}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trtkit", required=True)
    ap.add_argument("--images", required=True, help="an image folder, as calibrate reads it")
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--num-samples", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backends", nargs="+", default=["tract", "ort"])
    ap.add_argument("--ort-methods", nargs="*", default=["MinMax", "Entropy"])
    args = ap.parse_args()
    summary = []
    for model in args.model:
        name = os.path.splitext(os.path.basename(model))[0]
        with tempfile.TemporaryDirectory() as work:
            arrays = saved_inputs(args, model, work) if args.ort_methods else {}
            rows = {}
            for r in range(args.rounds):
                for backend in args.backends:
                    row = trtkit_row(args, model, backend, work)
                    rows.setdefault(row["side"], []).append(row)
                    print(json.dumps({"model": name, "round": r, **row}), flush=True)
                for method in args.ort_methods:
                    row = ort_row(model, arrays, method, args.batch_size, work)
                    rows.setdefault(row["side"], []).append(row)
                    print(json.dumps({"model": name, "round": r, **row}), flush=True)
            for side, runs in rows.items():
                med = lambda k: statistics.median(x[k] for x in runs) if k in runs[0] else None
                summary.append((name, side, med("calibration_s"), med("plain_s"), med("overhead_percent")))
    print(f"\n{args.num_samples} images at batch {args.batch_size}, {os.cpu_count()} cores, medians of {args.rounds} round(s)")
    print(f"{'model':<28} {'side':<30} {'calibration s':>13} {'plain run s':>11} {'overhead %':>10}")
    for name, side, cal, plain, over in summary:
        fmt = lambda v, f: format(v, f) if v is not None else "-"
        print(f"{name:<28} {side:<30} {cal:>13.2f} {fmt(plain, '11.2f')} {fmt(over, '10.1f')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
