#!/usr/bin/env python3
"""INT8 calibration side by side: trtkit calibrate/quantize vs ONNX Runtime's quantize_static.

Same models, same images, one machine, one run. For each model (exported with
scripts/export_torchvision.py, random seeded weights) and N random-normal images at batch B:

- trtkit calibrate --algo entropy,minmax,percentile --measure-plain, once per reference
  backend (tract, ort): the calibration time (model runs with the quantized tensors captured +
  histograms + the three range searches + caches) next to the plain model over the same
  batches on the same backend; end to end = process wall minus the plain run;
- trtkit quantize --int8 (each algorithm's cache from the tract run) / --fp16, then top-1
  agreement of each with FP32 (evaluated with ONNX Runtime CPU) on the calibration images and
  on held-out images;
- onnxruntime.quantization.quantize_static (QDQ, per-channel, MinMax and Entropy), timed end to
  end, and the same agreement figures for its models; "Entropy2048" is its Entropy with the
  2048 histogram bins TensorRT's method uses (its own default, 128 bins and 128 levels, leaves
  a single candidate threshold: the whole range).

Writes <out>/results.json and prints a summary. Needs numpy, onnx, onnxruntime, torch.

    python3 scripts/bench_calibration.py --trtkit ./trtkit --work /tmp/cal --out results/
"""
import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

import numpy as np


def run(cmd, **kw):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
    return p.stdout, time.time() - t0


def top1(path, batches, threads):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    t0 = time.time()
    out = [s.run(None, {name: b})[0].argmax(axis=1) for b in batches]
    return np.concatenate(out), time.time() - t0


@contextlib.contextmanager
def entropy_bins(bins):
    """quantize_static builds its EntropyCalibrater with num_bins=128 and num_quantized_bins=128,
    which leaves one candidate threshold (the whole range: MinMax in effect), and passes no
    option to change that. With `bins`, its create_calibrator gets num_bins=bins for the
    duration, so the threshold search is the one TensorRT's EntropyCalibration2 describes
    (2048 bins, 128 levels)."""
    if bins is None:
        yield
        return
    import importlib

    # The package exports a function named `quantize` too; ask for the module itself.
    q = importlib.import_module("onnxruntime.quantization.quantize")

    original = q.create_calibrator

    def with_bins(*a, **k):
        k["extra_options"] = {**(k.get("extra_options") or {}), "num_bins": bins}
        return original(*a, **k)

    q.create_calibrator = with_bins
    try:
        yield
    finally:
        q.create_calibrator = original


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trtkit", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", nargs="+", default=["mobilenet_v3_large", "resnet50"])
    ap.add_argument("--ort-models", nargs="*", default=["resnet50", "mobilenet_v3_large"])
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--heldout", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--backends", nargs="+", default=["tract", "ort"], help="trtkit reference backends to calibrate on")
    ap.add_argument("--ort-methods", nargs="+", default=["MinMax", "Entropy"])
    ap.add_argument("--budget", type=float, default=540.0, help="seconds; later steps are skipped past it")
    args = ap.parse_args()
    start = time.time()
    left = lambda: args.budget - (time.time() - start)
    os.makedirs(args.out, exist_ok=True)
    results = {"images": args.images, "heldout": args.heldout, "batch": args.batch, "threads": args.threads, "models": {}, "skipped": []}

    def dump():
        with open(os.path.join(args.out, "results.json.tmp"), "w") as f:
            json.dump(results, f, indent=2)
        os.replace(os.path.join(args.out, "results.json.tmp"), os.path.join(args.out, "results.json"))

    mdir = os.path.join(args.work, "models")
    _, t = run([sys.executable, "scripts/export_torchvision.py", *args.models, "--out", mdir])
    results["export_s"] = t
    calib_dir = os.path.join(args.work, "calib")
    os.makedirs(calib_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    calib = [rng.standard_normal((args.batch, 3, 224, 224), dtype=np.float32) for _ in range(args.images // args.batch)]
    for i, b in enumerate(calib):
        np.save(os.path.join(calib_dir, f"{i:03d}.npy"), b)
    rng = np.random.default_rng(1)
    held = [rng.standard_normal((args.batch, 3, 224, 224), dtype=np.float32) for _ in range(args.heldout // args.batch)]

    for m in args.models:
        model = os.path.join(mdir, f"{m}.onnx")
        r = results["models"].setdefault(m, {})
        ref_c, t_fp32 = top1(model, calib, args.threads)
        ref_h, _ = top1(model, held, args.threads)
        r["ort_fp32_inference_s"] = t_fp32

        def agreement(path):
            c, _ = top1(path, calib, args.threads)
            h, _ = top1(path, held, args.threads)
            return {"calib": float((c == ref_c).mean()), "heldout": float((h == ref_h).mean())}

        caches = {}
        for backend in args.backends:
            cache_dir = os.path.join(args.work, f"cal-{backend}")
            out, wall = run([args.trtkit, "calibrate", model, "--calib-data", calib_dir, "--batch-size", str(args.batch),
                             "--cache-dir", cache_dir, "--measure-plain", "--json", "--recalibrate",
                             "--algo", "entropy,minmax,percentile", "--backend", backend])
            rep = json.loads(out)
            tm = rep["timing"]
            r[f"trtkit_{backend}"] = {"backend": rep["backend"], "process_wall_s": wall,
                                      "end_to_end_s": wall - tm["plain_wall_s"],
                                      "tensors": len(rep["caches"][0]["tensors"]), **tm}
            caches[backend] = {c["algorithm"]: c["cache"] for c in rep["caches"]}
            dump()
            print(m, backend, json.dumps(r[f"trtkit_{backend}"]), flush=True)
        fp16 = os.path.join(args.work, f"{m}-fp16.onnx")
        first = caches[args.backends[0]]
        for algo, cache in first.items():
            int8 = os.path.join(args.work, f"{m}-int8-{algo.split()[0]}.onnx")
            run([args.trtkit, "quantize", model, "--int8", "--calibration-cache", cache, "-o", int8, "--no-check"])
            r[f"trtkit_int8_{algo.split()[0]}_top1_agreement"] = agreement(int8)
        run([args.trtkit, "quantize", model, "--fp16", "-o", fp16, "--no-check"])
        try:
            r["trtkit_fp16_top1_agreement"] = agreement(fp16)
        except Exception as e:  # noqa: BLE001 - report, do not stop the run
            r["trtkit_fp16_top1_agreement"] = f"onnxruntime could not run it: {e}"[:300]
        dump()
        print(m, json.dumps(r), flush=True)

    for m in args.ort_models:
        if m not in args.models:
            continue
        from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.it = iter(calib)

            def get_next(self):
                b = next(self.it, None)
                return None if b is None else {"input": b}

        model = os.path.join(mdir, f"{m}.onnx")
        r = results["models"][m]
        ref_c, _ = top1(model, calib, args.threads)
        ref_h, _ = top1(model, held, args.threads)
        for method, need in [("MinMax", 60), ("Entropy", 240), ("Entropy2048", 300)]:
            if method not in args.ort_methods:
                continue
            if left() < need:
                results["skipped"].append(f"ort {method} {m}: {left():.0f} s left")
                continue
            out = os.path.join(args.work, f"{m}-ort-{method}.onnx")
            t0 = time.time()
            with entropy_bins(2048 if method == "Entropy2048" else None):
                quantize_static(model, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                                calibrate_method=getattr(CalibrationMethod, method.replace("2048", "")),
                                extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
            t = time.time() - t0
            c, _ = top1(out, calib, args.threads)
            h, _ = top1(out, held, args.threads)
            r[f"ort_{method.lower()}"] = {"quantize_static_s": t, "top1_agreement": {
                "calib": float((c == ref_c).mean()), "heldout": float((h == ref_h).mean())}}
            dump()
            print(m, method, json.dumps(r[f"ort_{method.lower()}"]), flush=True)
    results["total_s"] = time.time() - start
    dump()
    return 0


if __name__ == "__main__":
    sys.exit(main())
