#!/usr/bin/env python3
"""INT8 triage figures for one pretrained ONNX classifier, trtkit beside ONNX Runtime.

Samples: seeded random crops of a handful of real photos (a folder of .png/.jpg), resized to the
model's input, normalized with ImageNet's mean/std, saved as .npy; one set calibrates, a
disjoint set of crops evaluates. Every variant is run with ONNX Runtime (CPU) on the evaluation
set and compared with the FP32 model: cosine of the flattened outputs, top-1 agreement.

Variants: FP16 (`trtkit quantize --fp16`), INT8 entropy (`trtkit calibrate` + `quantize --int8`),
INT8 at a cosine target (`quantize --int8 --target-cosine`, with its INT8 share), both again with
`--bias-correction` (input means from the calibration samples) or `--weight-clip mse`
, `--scale-search layer` (`--improve`, alone or joined), the target searched by bisection and
greedily (`--strategies`), and ONNX
Runtime's `quantize_static` (QDQ, per-channel, entropy and min-max) on the same calibration data.
With --scan, the sensitivity scan's wall time beside a Python loop doing the same per-node
variants with `quantize_static` + ONNX Runtime inference (on the first --scan-nodes nodes; the
ratio is per variant).

usage: int8_triage.py --trtkit BIN --model M.onnx --photos DIR --work DIR [--layout nhwc]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from PIL import Image
from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                      QuantType, quantize_static)

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def crops(photos, n, size, seed):
    """n random square crops (20-100% of the shorter side) of the photos, size x size, CHW."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        img = photos[i % len(photos)]
        w, h = img.size
        side = int(min(w, h) * rng.uniform(0.2, 1.0))
        x, y = rng.integers(0, w - side + 1), rng.integers(0, h - side + 1)
        c = img.crop((x, y, x + side, y + side)).resize((size, size), Image.BILINEAR)
        a = (np.asarray(c, dtype=np.float32) / 255.0 - MEAN) / STD
        out.append(a.transpose(2, 0, 1))
    return np.stack(out).astype(np.float32)


def session(path, threads):
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


def outputs(path, x, threads, batch=8):
    s = session(path, threads)
    name = s.get_inputs()[0].name
    return np.concatenate([s.run(None, {name: x[i:i + batch]})[0] for i in range(0, len(x), batch)])


def score(a, ref):
    a, ref = a.reshape(len(a), -1).astype(np.float64), ref.reshape(len(ref), -1).astype(np.float64)
    cos = float((a * ref).sum() / (np.linalg.norm(a) * np.linalg.norm(ref) + 1e-30))
    agree = float(100.0 * (a.argmax(1) == ref.argmax(1)).mean())
    return {"cosine": cos, "top1_agreement_pct": agree}


class Reader(CalibrationDataReader):
    def __init__(self, name, x, batch=8):
        self.items = iter([{name: x[i:i + batch]} for i in range(0, len(x), batch)])

    def get_next(self):
        return next(self.items, None)


def ort_int8(model, out, name, calib, method, **kw):
    quantize_static(model, out, Reader(name, calib), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=method, **kw)


def trtkit(args, *words):
    t = time.time()
    r = subprocess.run([args.trtkit, *words], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"trtkit {' '.join(words)}: {r.stderr.strip()}")
    return r.stdout, time.time() - t


class Rows(dict):
    """The result rows; each is printed as soon as it is measured (a call cut short keeps them)."""

    def __setitem__(self, k, v):
        super().__setitem__(k, v)
        extra = ""
        if v.get("int8_share") is not None:
            extra = (f"  INT8 share {100 * v['int8_share']:.1f}%  float: {len(v['float_nodes'])} nodes "
                     f"({v['variants']} variants, {v['search_s']} s)")
        print(f"{k:52s} cosine {v['cosine']:.5f}  top-1 agreement {v['top1_agreement_pct']:.1f}%{extra}",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trtkit", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--photos", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--calib", type=int, default=64)
    ap.add_argument("--eval", type=int, default=64)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--target", type=float, default=0.99)
    ap.add_argument("--scan", action="store_true")
    ap.add_argument("--scan-nodes", type=int, default=4)
    ap.add_argument("--backend", choices=["tract", "ort"], default="tract",
                    help="trtkit's reference backend for the target search and the scan")
    ap.add_argument("--improve", default="bias",
                    help="item-4 options measured beside plain INT8, comma-separated, each one of bias "
                         "(--bias-correction), clip (--weight-clip mse), scale (--scale-search layer) "
                         "or several joined with +")
    ap.add_argument("--strategies", default="bisect",
                    help="target searches of the plain INT8 rows, comma-separated: bisect, greedy")
    ap.add_argument("--no-ort", action="store_true", help="leave out ONNX Runtime's quantize_static rows")
    ap.add_argument("--scan-only", action="store_true", help="only calibrate and time the sensitivity scan")
    ap.add_argument("--ort-scan-method", choices=["entropy", "minmax"], default="entropy",
                    help="calibration of each quantize_static variant in the Python scan loop")
    ap.add_argument("--json")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = lambda *p: os.path.join(args.work, *p)
    photos = [Image.open(os.path.join(args.photos, f)).convert("RGB") for f in sorted(os.listdir(args.photos))]
    calib, evalx = crops(photos, args.calib, args.size, 1), crops(photos, args.eval, args.size, 2)
    if args.layout == "nhwc":
        calib, evalx = calib.transpose(0, 2, 3, 1).copy(), evalx.transpose(0, 2, 3, 1).copy()
    for name, x in [("calib", calib), ("eval", evalx)]:
        os.makedirs(w(name), exist_ok=True)
        np.save(w(name, "samples.npy"), x)
    m = args.model
    name = onnx.load(m, load_external_data=False).graph.input[0].name
    ref = outputs(m, evalx, args.threads)
    rows, t = Rows(), args.threads
    # trtkit: FP16, INT8 entropy, INT8 at the target.
    # --no-check: tract cannot load some FP16 graphs (a bias of shape [C,1,1]); ORT runs them.
    if not args.scan_only:
        trtkit(args, "quantize", m, "--fp16", "--no-check", "-o", w("fp16.onnx"))
        rows["FP16 (trtkit)"] = score(outputs(w("fp16.onnx"), evalx, t), ref)
    out, cal_s = trtkit(args, "calibrate", m, "--calib-data", w("calib"), "--batch-size", "8",
                        "--cache-dir", w("cal"), "--algo", "entropy", "--recalibrate", "--json")
    cache = json.loads(out)["caches"][0]["cache"]

    def alone(flags):
        """The flags with the scale search off unless they ask for it (trtkit's default is on)."""
        return flags if "--scale-search" in flags else [*flags, "--scale-search", "off"]

    def target_row(label, flags, strategy="bisect"):
        flags = alone(flags)
        out, target_s = trtkit(args, "quantize", m, "--int8", "--calibration-cache", cache, *flags,
                               "--target-cosine", str(args.target), "--eval-data", w("eval"),
                               "--search", strategy, "--research", "--backend", args.backend,
                               "-o", w("int8_target.onnx"), "--json")
        found = json.loads(out)
        rows[label] = dict(
            score(outputs(w("int8_target.onnx"), evalx, t), ref), int8_share=found.get("int8_share"),
            float_nodes=found["float_nodes"], search_s=round(target_s, 1), variants=found["variants"])

    if not args.scan_only:
        trtkit(args, "quantize", m, "--int8", "--calibration-cache", cache, "--no-check", "-o", w("int8.onnx"))
        rows["INT8 entropy (trtkit)"] = score(outputs(w("int8.onnx"), evalx, t), ref)
        for strategy in [s for s in args.strategies.split(",") if s]:
            target_row(f"INT8 at cosine {args.target}, {strategy} (trtkit)", [], strategy)
    # Item-4 options, alone and under the target. They measure on the calibration samples
    # (bias correction's input means, the scale search's captures); the rows score on the
    # evaluation samples.
    options = {"bias": ("bias correction", ["--bias-correction"]),
               "clip": ("weight clip mse", ["--weight-clip", "mse"]),
               "scale": ("scale search", ["--scale-search", "layer"])}
    for combo in [c for c in args.improve.split(",") if c] if not args.scan_only else []:
        parts = combo.split("+")
        label = " + ".join(options[p][0] for p in parts)
        flags = [f for p in parts for f in options[p][1]]
        trtkit(args, "quantize", m, "--int8", "--calibration-cache", cache, *alone(flags),
               "--eval-data", w("calib"), "--backend", args.backend, "--no-check", "-o", w("int8_x.onnx"))
        rows[f"INT8 entropy + {label} (trtkit)"] = score(outputs(w("int8_x.onnx"), evalx, t), ref)
        target_row(f"INT8 + {label} at cosine {args.target} (trtkit)", flags)
    # ONNX Runtime's quantizer on the same calibration samples: its default (activations
    # asymmetric, with a zero point: not what TensorRT runs) and with symmetric activations
    # (zero point 0, as TensorRT needs and trtkit writes).
    sym = {"extra_options": {"ActivationSymmetric": True}}
    ort_rows = [("entropy", CalibrationMethod.Entropy, {}), ("minmax", CalibrationMethod.MinMax, {}),
                ("entropy, symmetric activations", CalibrationMethod.Entropy, sym)]
    for label, method, kw in [] if args.no_ort or args.scan_only else ort_rows:
        path = w(f"ort_{len(rows)}.onnx")
        ort_int8(m, path, name, calib, method, **kw)
        rows[f"ORT quantize_static QDQ per-channel {label}"] = score(outputs(path, evalx, t), ref)
    result = {"model": m, "calib_samples": len(calib), "eval_samples": len(evalx), "rows": rows}
    if args.scan:
        out, scan_s = trtkit(args, "quantize", m, "--int8", "--calibration-cache", cache, "--sensitivity",
                             "--scale-search", "off", "--eval-data", w("eval"), "--backend", args.backend,
                             "--json")
        scan = json.loads(out)
        per_trtkit = scan_s / scan["variants"]
        nodes = [n.name for n in onnx.load(m).graph.node if n.op_type in ("Conv", "Gemm", "MatMul")][:args.scan_nodes]
        t0 = time.time()
        for node in nodes:
            for kw in ({"nodes_to_quantize": [node]}, {"nodes_to_exclude": [node]}):
                method = {"entropy": CalibrationMethod.Entropy, "minmax": CalibrationMethod.MinMax}[args.ort_scan_method]
                ort_int8(m, w("scan.onnx"), name, calib, method, **kw)
                outputs(w("scan.onnx"), evalx, t)
        per_ort = (time.time() - t0) / (2 * len(nodes))
        result["scan"] = {"trtkit_wall_s": scan_s, "trtkit_variants": scan["variants"],
                          "trtkit_s_per_variant": per_trtkit, "ort_loop_variants": 2 * len(nodes),
                          "ort_loop_s_per_variant": per_ort, "ratio_ort_over_trtkit": per_ort / per_trtkit,
                          "top5": [(n["name"], n["op"], round(n["alone"]["cosine"], 5), round(n["recovery"], 5))
                                   for n in scan["nodes"][:5]]}
        print(f"sensitivity scan: trtkit {scan_s:.1f} s for {scan['variants']} variants "
              f"({per_trtkit:.2f} s each); Python quantize_static + ORT loop {per_ort:.2f} s per variant "
              f"({2 * len(nodes)} variants); ratio {per_ort / per_trtkit:.1f}x", flush=True)
        print("most damaging alone:", result["scan"]["top5"], flush=True)
    if args.json:
        json.dump(result, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
