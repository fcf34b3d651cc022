#!/usr/bin/env python3
"""INT8 triage figures for one pretrained ONNX classifier, scored on photos the search never saw.

Samples: seeded random square crops (20-100% of the shorter side) of a folder of real photos
(.png/.jpg), resized to the model's input, normalized with ImageNet's mean/std, saved as one
samples.npy per set under --work. The photos are split before any crop is cut: the last
--check-photos of them (by sorted name) are held out, and only they give the check crops; the
others give the calibration crops (seed 1) and the tuning crops (seed 2). So every figure in
the check columns comes from images that neither calibration nor any search or rounding step
looked at.

Rows: each --variants entry is run twice through `trtkit quantize --int8`, tuned on the tuning
crops (--eval-data) and scored on the check crops (--check-data): measured as it is (every node
INT8), and at a cosine target (--target-cosine, searched with --strategy). A variant is plain
(the calibration cache's scales, `--scale-search off`) or a +-joined set of scale (trtkit's
default layer-error scale search), adaptive (`--weight-rounding adaptive`), bias
(`--bias-correction`) and clip (`--weight-clip mse`). Each row keeps the tuning cosine and
top-1 agreement, the check cosine and top-1 agreement with their 95% bootstrap intervals, the
INT8 share, the nodes left in float, the variants measured, the wall time, met and trtkit's
notes. A failing trtkit call becomes a failed row (with its error's last line) and the rest go on.

Extras, each only where ONNX Runtime can score it: --fp16 adds trtkit's FP16 model, and ONNX
Runtime's `quantize_static` (QDQ, per-channel, entropy and min-max, on the calibration crops)
adds its rows when `onnxruntime.quantization` imports (it needs the `onnx` package) and --no-ort
is not given. These are run with ONNX Runtime (CPU) on the check crops beside the FP32 model,
with intervals drawn the way trtkit draws them (1000 resamples of the samples).
--scan times trtkit's sensitivity scan (--sensitivity, seconds per variant), beside a Python loop
of quantize_static + ONNX Runtime doing the same per-node variants when that loop can run.

Hard requirements: numpy and Pillow (Pillow may come through PYTHONPATH); onnxruntime optional.

usage: int8_triage.py --trtkit BIN --model M.onnx --photos DIR --work DIR [--check-photos K]
                      [--calib N] [--tune N] [--check N] [--variants LIST] [--target T]
                      [--strategy greedy|bisect] [--backend tract|ort] [--device cpu|cuda]
                      [--size S] [--layout nchw|nhwc] [--fp16] [--no-ort] [--scan]
                      [--json FILE] [--md FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from PIL import Image

try:
    import onnxruntime as ort
except ImportError:
    ort = None
try:
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                          QuantType, quantize_static)
except ImportError:
    quantize_static = None

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
PHOTO_TYPES = (".png", ".jpg", ".jpeg")
# Each variant's parts and the trtkit flags they add; the scale search is trtkit's default, so
# a variant without "scale" turns it off.
PARTS = {"plain": [], "scale": [], "adaptive": ["--weight-rounding", "adaptive"],
         "bias": ["--bias-correction"], "clip": ["--weight-clip", "mse"]}


def crops(photos, n, size, seed, mean=MEAN, std=STD):
    """n random crops of the photos with the aspect of size = (H, W) (20-100% of the largest such
    box that fits), resized to H x W, normalized with mean/std, CHW."""
    rng = np.random.default_rng(seed)
    (th, tw), out = size, []
    for i in range(n):
        img = photos[i % len(photos)]
        w, h = img.size
        box_h = min(h, w * th / tw) * rng.uniform(0.2, 1.0)
        bh, bw = max(1, int(box_h)), max(1, int(box_h * tw / th))
        x, y = rng.integers(0, w - bw + 1), rng.integers(0, h - bh + 1)
        c = img.crop((x, y, x + bw, y + bh)).resize((tw, th), Image.BILINEAR)
        a = (np.asarray(c, dtype=np.float32) / 255.0 - mean) / std
        out.append(a.transpose(2, 0, 1))
    return np.stack(out).astype(np.float32)


def size_arg(text):
    """argparse type of --size: S or HxW."""
    h, _, w = text.lower().partition("x")
    return (int(h), int(w or h))


def floats_arg(text):
    """argparse type of --mean/--std: three comma-separated numbers."""
    return np.array([float(v) for v in text.split(",")], dtype=np.float32)


def variant_flags(variant):
    """trtkit's flags for a variant such as scale+adaptive."""
    parts = variant.split("+")
    flags = [f for p in parts for f in PARTS[p]]
    return flags if "scale" in parts else [*flags, "--scale-search", "off"]


def check_variant(text):
    """argparse type of --variants: a comma list of known parts joined with +."""
    out = [v for v in text.split(",") if v]
    for v in out:
        bad = [p for p in v.split("+") if p not in PARTS]
        if bad:
            raise argparse.ArgumentTypeError(f"{v}: unknown part {bad[0]} (known: {', '.join(PARTS)})")
    return out


def run_trtkit(binary, words, parse=True):
    """(parsed JSON or None, seconds, the error's last line or None) of one trtkit call."""
    t = time.time()
    r = subprocess.run([binary, *words], capture_output=True, text=True)
    seconds = time.time() - t
    if r.returncode != 0:
        lines = [l for l in r.stderr.strip().splitlines() if l.strip()] or [f"exit status {r.returncode}"]
        last = lines[-1].strip()
        return None, seconds, last[len("error: "):] if last.startswith("error: ") else last
    if not parse:
        return None, seconds, None
    try:
        return (json.loads(r.stdout) if r.stdout.strip() else {}), seconds, None
    except json.JSONDecodeError as e:
        return None, seconds, f"output is not JSON ({e})"


def input_of(binary, model):
    """(name, dims) of the model's first input, from `trtkit inspect --json`; (None, None) if not."""
    found, _, _ = run_trtkit(binary, ["inspect", model, "--json"])
    try:
        first = found["inputs"][0]
        return first["name"], first["dims"]
    except (TypeError, KeyError, IndexError):
        return None, None


# ONNX Runtime scoring, for the rows trtkit does not score itself.

def ort_outputs(path, x, threads, batch=8):
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    return np.concatenate([s.run(None, {name: x[i:i + batch]})[0] for i in range(0, len(x), batch)])


def interval(values, point):
    """2.5th and 97.5th percentiles, widened to take in the point estimate (as trtkit's)."""
    v = np.sort(values)
    at = lambda q: float(v[int(round((len(v) - 1) * q))])
    return [min(at(0.025), point), max(at(0.975), point)]


def scored(out, ref, seed=0, resamples=1000):
    """Cosine of the flattened outputs and top-1 agreement against ref, with 95% intervals (a
    bootstrap of the cosine, Wilson's for top-1), as trtkit draws them."""
    a, b = out.reshape(len(out), -1).astype(np.float64), ref.reshape(len(ref), -1).astype(np.float64)
    dot, aa, bb = (a * b).sum(1), (a * a).sum(1), (b * b).sum(1)
    agree = (a.argmax(1) == b.argmax(1)).astype(np.float64)
    cos_of = lambda i: float(dot[i].sum() / (np.sqrt(aa[i].sum() * bb[i].sum()) + 1e-300))
    n = len(a)
    everyone = np.arange(n)
    cos, top1 = cos_of(everyone), float(100.0 * agree.mean())
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    res = {"cosine": cos, "top1_agreement_pct": top1, "mae": float(np.abs(a - b).mean()), "samples": n,
           "cosine_interval": [cos, cos], "top1_agreement_interval": [top1, top1]}
    res["top1_agreement_interval"] = wilson(int(agree.sum()), n)
    if n > 1:
        res["cosine_interval"] = interval(np.array([cos_of(p) for p in picks]), cos)
    return res


def wilson(k, n, z=1.959964):
    """The Wilson score 95% interval of k of n, % (as trtkit's top-1 agreement interval)."""
    p = k / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [max(0.0, min(100 * p, 100 * (center - half))), min(100.0, max(100 * p, 100 * (center + half)))]


# Rows: printed as they come, kept in the JSON file after each one.

def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def cells(row):
    """The table's cells of one row."""
    if row.get("failed"):
        return [row["label"], "failed: " + row["error"], "", "", "", "", "", "", "", fmt(row.get("wall_s"), ".0f")]
    tune, chk, hold = row.get("tuning") or {}, row.get("check") or {}, row.get("holdout") or {}

    def with_interval(s, key, spec):
        if s.get(key) is None:
            return "-"
        lo_hi = s.get(key.replace("_pct", "") + "_interval")
        inner = f" [{format(lo_hi[0], spec)}, {format(lo_hi[1], spec)}]" if lo_hi else ""
        return format(s[key], spec) + inner

    tuning = (f"{fmt(tune.get('cosine'), '.5f')} / {fmt(tune.get('top1_agreement_pct'), '.1f')}%"
              if tune else "-")
    share = row.get("int8_share")
    return [row["label"], tuning, with_interval(chk, "cosine", ".5f") + (" *" if row.get("check_steered") else ""),
            with_interval(chk, "top1_agreement_pct", ".1f"),
            with_interval(hold, "cosine", ".5f"), with_interval(hold, "top1_agreement_pct", ".1f"),
            fmt(share if share is None else 100 * share, ".1f") + ("%" if share is not None else ""),
            fmt(row.get("float_nodes"), "d"), fmt(row.get("variants"), "d"), fmt(row.get("wall_s"), ".0f")]


HEADER = ["variant", "tuning cosine / top-1", "check cosine [95% interval]", "check top-1 [interval]",
          "holdout cosine [interval]", "holdout top-1 [interval]", "INT8 share", "float nodes", "variants", "s"]


STEERED = ("* the tuning samples met the target and the check samples did not; trtkit then left more "
           "nodes in float until the check met it too, so the check chose where the search stopped "
           "and that figure is not an untouched one (the note gives the check's figure before).")


def footnotes(rows):
    """The notes under the table: the steered check, and trtkit's notes of each row."""
    out = [STEERED] if any(r.get("check_steered") for r in rows) else []
    out += [f"{r['label']}: {n}" for r in rows for n in r.get("notes") or []]
    return out


def markdown(rows):
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells(r)) + " |" for r in rows]
    notes = footnotes(rows)
    return "\n".join(lines) + "\n" + ("\n" + "\n".join(f"- {n}" for n in notes) + "\n" if notes else "")


def plain_table(rows):
    table = [HEADER] + [cells(r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table)


class Results:
    def __init__(self, path, meta):
        self.path, self.data = path, {**meta, "rows": []}

    def add(self, row):
        self.data["rows"].append(row)
        if row.get("failed"):
            print(f"{row['label']}: FAILED after {row.get('wall_s', 0):.0f} s: {row['error']}", flush=True)
            self.save()
            return
        c = cells(row)
        extra = ""
        if row.get("met") is not None:
            extra += "  met" if row["met"] else "  NOT met"
        if row.get("notes"):
            extra += "  notes: " + " | ".join(row["notes"])
        print(f"{c[0]}: tuning {c[1]}  check cosine {c[2]}  top-1 {c[3]}  holdout cosine {c[4]}  "
              f"top-1 {c[5]}  INT8 {c[6]}  float {c[7]}  variants {c[8]}  {c[9]} s{extra}", flush=True)
        self.save()

    def save(self):
        if self.path:
            with open(self.path, "w") as f:
                json.dump(self.data, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trtkit", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--photos", required=True, help="a folder of .png/.jpg photos")
    ap.add_argument("--work", required=True, help="where the sample sets and models go")
    ap.add_argument("--check-photos", type=int, default=4,
                    help="the last K photos by sorted name give the check crops, and only they (default 4)")
    ap.add_argument("--calib", type=int, default=64, help="calibration crops (default 64)")
    ap.add_argument("--tune", type=int, default=48, help="tuning crops (default 48)")
    ap.add_argument("--check", type=int, default=64, help="check crops (default 64)")
    ap.add_argument("--size", type=size_arg,
                    help="crop size, S or HxW (default: the model's input height and width, else 224)")
    ap.add_argument("--mean", type=floats_arg, default=MEAN, help="per-channel mean (default ImageNet's)")
    ap.add_argument("--std", type=floats_arg, default=STD, help="per-channel std (default ImageNet's)")
    ap.add_argument("--holdout-photos", type=int, default=0,
                    help="photos held out from trtkit altogether (before the check photos by name): "
                         "every written model is scored on their crops with ONNX Runtime")
    ap.add_argument("--holdout", type=int, default=64, help="holdout crops (default 64)")
    ap.add_argument("--trtkit-arg", action="append", default=[],
                    help="an extra argument for trtkit's calibrate and quantize (repeat), e.g. "
                         "--trtkit-arg=--input-shape --trtkit-arg=x:-1x3x48x192")
    ap.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw")
    ap.add_argument("--variants", type=check_variant,
                    default=check_variant("plain,scale,adaptive,scale+adaptive,scale+adaptive+bias,scale+bias"),
                    help="comma list of plain or parts joined with +: scale, adaptive, bias, clip")
    ap.add_argument("--target", type=float, default=0.99, help="cosine target of the target rows")
    ap.add_argument("--strategy", choices=["greedy", "bisect"], default="greedy",
                    help="trtkit's target search (default greedy)")
    ap.add_argument("--backend", choices=["tract", "ort"], help="trtkit's backend (default: trtkit's)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="trtkit's device")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="ONNX Runtime threads here")
    ap.add_argument("--fp16", action="store_true", help="add trtkit's FP16 model (needs onnxruntime)")
    ap.add_argument("--no-ort", action="store_true", help="leave out ONNX Runtime's quantize_static rows")
    ap.add_argument("--scan", action="store_true", help="time trtkit's sensitivity scan")
    ap.add_argument("--scan-nodes", type=int, default=4,
                    help="nodes of the Python quantize_static scan loop, when it can run")
    ap.add_argument("--json", help="write everything here (rewritten after each row)")
    ap.add_argument("--md", help="write the markdown table here")
    args = ap.parse_args()

    os.makedirs(args.work, exist_ok=True)
    w = lambda *p: os.path.join(args.work, *p)
    m = args.model
    name, dims = input_of(args.trtkit, m)
    if args.size is None:
        h, w_ = ((dims[2], dims[3]) if args.layout == "nchw" else (dims[1], dims[2])) \
            if dims and len(dims) == 4 else (None, None)
        ok = lambda v: isinstance(v, int) and v > 0
        args.size = (h if ok(h) else 224, w_ if ok(w_) else (h if ok(h) else 224))

    # The photos, split before any crop: the held-out ones give the check crops only.
    files = sorted(f for f in os.listdir(args.photos) if f.lower().endswith(PHOTO_TYPES))
    kept_apart = args.check_photos + args.holdout_photos
    if not (0 < args.check_photos and kept_apart < len(files)):
        sys.exit(f"--check-photos {args.check_photos} --holdout-photos {args.holdout_photos}: "
                 f"{len(files)} photos in {args.photos}; every part of the split needs at least one")
    seen, held = files[:-kept_apart], files[-args.check_photos:]
    holdout = files[len(seen):len(files) - args.check_photos]
    load = lambda fs: [Image.open(os.path.join(args.photos, f)).convert("RGB") for f in fs]
    seen_imgs, held_imgs = load(seen), load(held)
    crop = lambda imgs, n, seed: crops(imgs, n, args.size, seed, args.mean, args.std)
    sets = {"calib": crop(seen_imgs, args.calib, 1), "tune": crop(seen_imgs, args.tune, 2),
            "check": crop(held_imgs, args.check, 3)}
    if holdout:
        sets["holdout"] = crop(load(holdout), args.holdout, 4)
    for k, x in sets.items():
        if args.layout == "nhwc":
            sets[k] = x = x.transpose(0, 2, 3, 1).copy()
        os.makedirs(w(k), exist_ok=True)
        np.save(w(k, "samples.npy"), x)
    print(f"photos: {len(seen)} for calibration and tuning ({', '.join(seen)}); "
          f"{len(held)} held out for the check ({', '.join(held)}); {len(holdout)} held out from "
          f"trtkit ({', '.join(holdout) or 'none'}); crops {args.size[0]}x{args.size[1]}: "
          + ", ".join(f"{k} {len(v)}" for k, v in sets.items()), flush=True)

    res = Results(args.json, {"model": m, "input": name, "size": args.size, "layout": args.layout,
                              "photos": {"seen": seen, "held_out": held, "holdout": holdout},
                              "samples": {k: len(v) for k, v in sets.items()},
                              "target_cosine": args.target, "strategy": args.strategy,
                              "backend": args.backend, "device": args.device})
    passthrough = ["--device", args.device, "--batch-size", "8", *args.trtkit_arg]
    if args.backend:
        passthrough += ["--backend", args.backend]

    found, cal_s, err = run_trtkit(args.trtkit, [
        "calibrate", m, "--calib-data", w("calib"), "--batch-size", "8", "--cache-dir", w("cal"),
        "--algo", "entropy", "--recalibrate", "--json", *passthrough[:2], *args.trtkit_arg,
        *(["--backend", args.backend] if args.backend else [])])
    if err:
        sys.exit(f"trtkit calibrate: {err}")
    cache = found["caches"][0]["cache"]
    res.data["calibration"] = {"cache": cache, "wall_s": round(cal_s, 1)}
    print(f"calibrated on {args.calib} crops in {cal_s:.1f} s: {cache}", flush=True)

    # trtkit reads both sets up to --eval-samples.
    common = ["--int8", "--calibration-cache", cache, "--eval-data", w("tune"), "--check-data", w("check"),
              "--eval-samples", str(max(args.tune, args.check)), "--json", *passthrough]
    holdout_ref = None
    if "holdout" in sets:
        if ort is None:
            print("no onnxruntime here: the holdout crops are not scored", flush=True)
        else:
            holdout_ref = ort_outputs(m, sets["holdout"], args.threads)
    for variant in args.variants:
        for target in (None, args.target):
            label = variant if target is None else f"{variant} @ {target} {args.strategy}"
            out = w("int8_" + variant.replace("+", "_") + ("" if target is None else "_target") + ".onnx")
            words = ["quantize", m, *common, *variant_flags(variant), "-o", out]
            if target is not None:
                words += ["--target-cosine", str(target), "--search", args.strategy, "--research"]
            found, secs, err = run_trtkit(args.trtkit, words)
            row = {"label": label, "variant": variant, "target_cosine": target, "wall_s": round(secs, 1),
                   "output": out}
            if err:
                res.add({**row, "failed": True, "error": err})
                continue
            floats = found.get("float_nodes")
            notes = found.get("notes") or []
            if target is not None:
                row["label"] = f"{label} ({'met' if found.get('met') else 'NOT met'})"
                # Where the tuning samples met the target and the check ones did not, trtkit goes
                # on moving nodes to float until the check meets it: the check then decided where
                # the search stopped, and its figure is no longer one the search never saw.
                row["check_steered"] = bool(found.get("check") and found.get("met_on_tuning") and notes)
            if "holdout" in sets and ort is not None:
                row["holdout"] = scored(ort_outputs(out, sets["holdout"], args.threads), holdout_ref)
            res.add({**row, "tuning": found.get("score"), "check": found.get("check"),
                     "int8_share": found.get("int8_share"),
                     "float_nodes": len(floats) if floats is not None else (0 if target is None else None),
                     "float_node_names": floats, "variants": found.get("variants"),
                     "trtkit_wall_s": found.get("wall_s"), "met": found.get("met"),
                     "met_on_tuning": found.get("met_on_tuning"), "notes": notes,
                     "samples": found.get("samples"), "full_int8_check": found.get("full_int8_check"),
                     "rounding": found.get("rounding"), "scale_search": found.get("scale_search")})

    # The extras ONNX Runtime scores on the check crops, beside the FP32 model.
    check = sets["check"]
    want_ort = quantize_static is not None and not args.no_ort
    if quantize_static is None and not args.no_ort:
        print("onnxruntime.quantization does not import here (it needs the onnx package): "
              "no quantize_static rows", flush=True)
    if args.fp16 and ort is None:
        print("no onnxruntime here: no FP16 row", flush=True)
    elif args.fp16 or want_ort:
        ref = ort_outputs(m, check, args.threads)

        def ort_row(label, path, secs, err=None):
            row = {"label": label, "wall_s": round(secs, 1), "scored_by": "onnxruntime CPU"}
            if err:
                res.add({**row, "failed": True, "error": err})
            else:
                try:
                    res.add({**row, "check": scored(ort_outputs(path, check, args.threads), ref)})
                except Exception as e:  # a model ONNX Runtime refuses is a failed row, not the end
                    res.add({**row, "failed": True, "error": f"onnxruntime: {str(e).strip().splitlines()[-1]}"})

        if args.fp16:
            # --no-check: tract cannot load some FP16 graphs (a bias of shape [C,1,1]); ORT runs them.
            _, secs, err = run_trtkit(args.trtkit, ["quantize", m, "--fp16", "--no-check", "-o", w("fp16.onnx")],
                                      parse=False)
            ort_row("FP16 (trtkit)", w("fp16.onnx"), secs, err)
        if want_ort:
            ort_name = name or ort.InferenceSession(m, providers=["CPUExecutionProvider"]).get_inputs()[0].name
            for label, method in [("entropy", CalibrationMethod.Entropy), ("minmax", CalibrationMethod.MinMax)]:
                path, t = w(f"ort_{label}.onnx"), time.time()
                try:
                    ort_quantize(m, path, ort_name, sets["calib"], method)
                    err = None
                except Exception as e:
                    err = f"quantize_static: {str(e).strip().splitlines()[-1]}"
                ort_row(f"ORT quantize_static QDQ per-channel {label}", path, time.time() - t, err)

    if args.scan:
        scan(args, res, m, cache, common, w)
    res.save()
    rows = res.data["rows"]
    print("\n" + plain_table(rows), flush=True)
    for n in footnotes(rows):
        print(n, flush=True)
    if args.md:
        with open(args.md, "w") as f:
            f.write(f"INT8 triage of {os.path.basename(m)}: tuned on {len(sets['tune'])} crops of "
                    f"{len(seen)} photos, checked on {len(check)} crops of {len(held)} held-out photos; "
                    f"target cosine {args.target} ({args.strategy}).\n\n" + markdown(rows))


def ort_quantize(model, out, name, calib, method, batch=8, **kw):
    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{name: calib[i:i + batch]} for i in range(0, len(calib), batch)])

        def get_next(self):
            return next(self.items, None)

    quantize_static(model, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=method, **kw)


def scan(args, res, m, cache, common, w):
    """The sensitivity scan's wall time per variant, and the Python loop's beside it if it can run."""
    words = ["quantize", m, *[c for c in common if c != "--research"], "--sensitivity", "--scale-search", "off"]
    found, scan_s, err = run_trtkit(args.trtkit, words)
    if err:
        res.data["scan"] = {"failed": True, "error": err, "wall_s": round(scan_s, 1)}
        print(f"sensitivity scan failed: {err}", flush=True)
        return
    variants = found.get("variants") or 0
    per = scan_s / variants if variants else None
    out = {"trtkit_wall_s": round(scan_s, 1), "trtkit_variants": variants, "trtkit_s_per_variant": per,
           "top5": [(n.get("name"), n.get("op"), n.get("alone", {}).get("cosine"), n.get("recovery"))
                    for n in (found.get("nodes") or [])[:5]]}
    print(f"sensitivity scan: trtkit {scan_s:.1f} s for {variants} variants ({fmt(per, '.2f')} s each)",
          flush=True)
    if quantize_static is not None and ort is not None and not args.no_ort:
        # The same per-node variants (one node alone in INT8, one node alone left in float) with
        # quantize_static, each scored by ONNX Runtime on the tuning crops.
        nodes = [n["name"] for n in found.get("nodes") or [] if n.get("name") and not n["name"].startswith("#")]
        nodes = nodes[:args.scan_nodes]
        calib, tune = np.load(w("calib", "samples.npy")), np.load(w("tune", "samples.npy"))
        name = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).get_inputs()[0].name
        t0 = time.time()
        for node in nodes:
            for kw in ({"nodes_to_quantize": [node]}, {"nodes_to_exclude": [node]}):
                ort_quantize(m, w("scan.onnx"), name, calib, CalibrationMethod.Entropy, **kw)
                ort_outputs(w("scan.onnx"), tune, args.threads)
        if nodes:
            per_ort = (time.time() - t0) / (2 * len(nodes))
            out.update(ort_loop_variants=2 * len(nodes), ort_loop_s_per_variant=per_ort,
                       ratio_ort_over_trtkit=per_ort / per if per else None)
            print(f"Python quantize_static + ORT loop: {per_ort:.2f} s per variant ({2 * len(nodes)} variants)"
                  + (f"; ratio {per_ort / per:.1f}x" if per else ""), flush=True)
    res.data["scan"] = out
    print("most damaging alone:", out["top5"], flush=True)


if __name__ == "__main__":
    main()
