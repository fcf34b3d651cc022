#!/usr/bin/env python3
"""Where precision breaks, for a list of ONNX models, on crops of real photos.

For each model: crops of the photos (the last --check-photos photos are held out and give the
check crops only; the others give the calibration and tuning crops), then with trtkit
- the FP16 rewrite (`quantize --fp16`), layer by layer against the FP32 model on the check crops
  (`compare --layerwise`): the first divergent tensor, the worst ones, the output's cosine;
- entropy calibration and the full INT8 rewrite (the cache's scales as they are), layer by layer likewise;
- the FP16 precision search (`quantize --fp16 --target-cosine`, tuned on the tuning crops, judged
  on the check crops): the nodes kept in float32 and why;
- the wall time of each layerwise comparison beside the plain `compare` of the same two models.

A model is NAME=PATH[:SIZE[:LAYOUT[:MEAN:STD[:SHAPE]]]] (SIZE as 224 or 48x192; LAYOUT nchw or
nhwc; MEAN and STD three comma-separated numbers for pixels in [0, 1], default ImageNet's; SHAPE
an `--input-shape` for a model whose height and width are not fixed, e.g. x:-1x3x48x192). --extra
arguments go to every trtkit call that runs the model (calibrate, compare, the search), not to
the plain rewrites. Calibration runs on ONNX Runtime.
Needs numpy and Pillow. Writes one JSON object per model to --json (rewritten after each model)
and a markdown table to standard output.

usage: precision_figures.py --trtkit BIN --photos DIR --work DIR [--check-photos K]
                            [--target 0.999] [--samples N] [--no-search] [--extra ARG ...] MODEL ...
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from int8_triage import crops  # noqa: E402  (the same crops the INT8 triage scores on)

IMAGENET = ("0.485,0.456,0.406", "0.229,0.224,0.225")


def trtkit(binary, words):
    """(parsed JSON or None, seconds, error line or None) of one trtkit call."""
    start = time.time()
    r = subprocess.run([binary, *words], capture_output=True, text=True)
    secs = time.time() - start
    if r.returncode not in (0, 1) or not r.stdout.strip():
        lines = [l for l in r.stderr.splitlines() if l.strip()] or [f"exit {r.returncode}"]
        return None, secs, lines[-1]
    try:
        return json.loads(r.stdout), secs, None
    except json.JSONDecodeError:
        return None, secs, "output is not JSON"


def spec(text):
    name, _, rest = text.partition("=")
    parts = rest.split(":", 5)  # the SHAPE may hold a colon itself
    size = parts[1] if len(parts) > 1 and parts[1] else "224"
    h, _, w = size.lower().partition("x")
    return {
        "name": name, "path": parts[0], "size": (int(h), int(w or h)),
        "layout": parts[2] if len(parts) > 2 and parts[2] else "nchw",
        "mean": np.array([float(v) for v in (parts[3] if len(parts) > 4 else IMAGENET[0]).split(",")], np.float32),
        "shape": ["--input-shape", parts[5]] if len(parts) > 5 and parts[5] else [],
        "std": np.array([float(v) for v in (parts[4] if len(parts) > 4 else IMAGENET[1]).split(",")], np.float32),
    }


def layerwise_summary(found):
    if not found:
        return None
    tensors = found.get("tensors", [])
    cos = lambda t: t["cosine"] if isinstance(t["cosine"], float) else -2.0  # noqa: E731 ("NaN")
    worst = sorted(tensors, key=cos)[:3]
    last = tensors[-1]["cosine"] if tensors else None
    overflow = [t["name"] for t in tensors if t.get("beyond_fp16_pct", 0) > 0]
    return {"first": found.get("first_divergence"), "tensors": len(tensors), "last_cosine": last,
            "worst": [(t["name"], t["op"], t["cosine"]) for t in worst],
            "beyond_fp16": overflow[:5], "beyond_fp16_count": len(overflow),
            "memory": found.get("memory"), "backend": found.get("backend_a")}


def run_model(args, m, photos):
    work = os.path.join(args.work, m["name"])
    os.makedirs(work, exist_ok=True)
    seen, held = photos[:-args.check_photos], photos[-args.check_photos:]
    sets = {"calib": crops(seen, 64, m["size"], 1, m["mean"], m["std"]),
            "tune": crops(seen, 48, m["size"], 2, m["mean"], m["std"]),
            "check": crops(held, args.samples, m["size"], 3, m["mean"], m["std"])}
    for k, x in sets.items():
        if m["layout"] == "nhwc":
            x = x.transpose(0, 2, 3, 1).copy()
        os.makedirs(os.path.join(work, k), exist_ok=True)
        np.save(os.path.join(work, k, "samples.npy"), x)
    w = lambda *p: os.path.join(work, *p)  # noqa: E731
    check = w("check", "samples.npy")
    out = {"model": m["name"], "file": m["path"]}
    extra = list(args.extra) + m["shape"]
    _, secs, err = trtkit(args.trtkit, ["quantize", m["path"], "--fp16", "-o", w("fp16.onnx"), "--json"])
    out["fp16_rewrite_error"] = err
    cal, secs, err = trtkit(args.trtkit, ["calibrate", m["path"], "--calib-data", w("calib"), "--batch-size", "8",
                                          "--cache-dir", w("cal"), "--algo", "entropy", "--recalibrate", "--backend", "ort",
                                          "--json", *extra])
    cache = cal["caches"][0]["cache"] if cal else None
    out["calibration_error"] = err
    if cache:
        _, _, err = trtkit(args.trtkit, ["quantize", m["path"], "--int8", "--calibration-cache", cache,
                                         "-o", w("int8.onnx"), "--json"])
        out["int8_rewrite_error"] = err
    for prec in ("fp16", "int8"):
        a = w(f"{prec}.onnx")
        if not os.path.exists(a):
            continue
        plain, plain_s, err = trtkit(args.trtkit, ["compare", a, m["path"], "--inputs", check, "--json", *extra])
        found, lw_s, lw_err = trtkit(args.trtkit, ["compare", "--layerwise", a, m["path"], "--inputs", check,
                                                   "--json", "--plot", w(f"{prec}-layerwise.svg"), *extra])
        out[prec] = {"plain_compare_s": round(plain_s, 2), "layerwise_s": round(lw_s, 2),
                     "output_cosine": plain["outputs"][0]["closeness"].get("cosine") if plain else None,
                     "compare_error": err, "layerwise_error": lw_err,
                     "layerwise": layerwise_summary(found)}
        with open(w(f"{prec}-layerwise.json"), "w") as f:
            json.dump(found, f)
    if args.no_search:
        return out
    found, secs, err = trtkit(args.trtkit, [
        "quantize", m["path"], "--fp16", "--target-cosine", str(args.target), "--eval-data", w("tune"),
        "--check-data", w("check"), "--eval-samples", str(max(48, args.samples)), "-o", w("fp16-target.onnx"),
        "--research", "--json", *extra])
    out["fp16_search"] = {"wall_s": round(secs, 1), "error": err}
    if found:
        out["fp16_search"].update({k: found.get(k) for k in (
            "met", "float_nodes", "kept", "score", "check", "full_fp16", "full_fp16_check", "notes", "variants",
            "fp16_share", "emulated")})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trtkit", required=True)
    ap.add_argument("--photos", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--check-photos", type=int, default=5)
    ap.add_argument("--samples", type=int, default=32, help="check crops, the layerwise samples")
    ap.add_argument("--target", type=float, default=0.999)
    ap.add_argument("--no-search", action="store_true", help="leave out the FP16 precision search")
    ap.add_argument("--extra", action="append", default=[], help="an extra trtkit argument (repeat)")
    ap.add_argument("--json", required=True)
    ap.add_argument("models", nargs="+", type=spec)
    args = ap.parse_args()
    names = sorted(f for f in os.listdir(args.photos) if f.lower().endswith((".png", ".jpg", ".jpeg")))
    photos = [Image.open(os.path.join(args.photos, f)).convert("RGB") for f in names]
    results = []
    for m in args.models:
        print(f"== {m['name']}", flush=True)
        results.append(run_model(args, m, photos))
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
        print(json.dumps(results[-1], default=str)[:3000], flush=True)


if __name__ == "__main__":
    main()
