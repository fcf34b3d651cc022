#!/usr/bin/env python3
"""Detection and segmentation agreement of a pretrained ONNX model's FP16 and INT8 rewrites with
its FP32 self, on real photos, as `trtkit compare --task` judges it.

Samples: seeded random crops of a folder of photos (as scripts/int8_triage.py cuts them: 20-100%
of the largest box of the model's aspect, resized to --size), scaled to [0, 1], normalized with
--mean/--std, channels reversed with --bgr; the evaluation crops (seed 2) go into one .npz keyed
by the model's input name, the calibration crops (seed 1) into calib/samples.npy. trtkit writes
the FP16 model (`quantize --fp16`) and the INT8 model (`calibrate`, entropy, then `quantize
--int8` with its defaults), both with `--no-check` (tract cannot analyse some detectors with
symbolic image sizes; the comparison runs each rewrite anyway), and compares each with the FP32 model on the evaluation crops
(`compare X FP32 --inputs … --task T --json`). One row per precision: the task's figures (boxes
of each side, matched at IoU 0.5 and 0.75, only-A and only-B boxes, the score shift and the
agreement mAP; or pixel agreement and mIoU), the cosine of the first output that could be
compared element-wise, and the seconds trtkit spent on decoding, NMS and matching.

usage: task_agreement.py --trtkit BIN --model M.onnx --photos DIR --work DIR --size HxW
                         --task detect|segment [--mean R,G,B] [--std R,G,B] [--bgr]
                         [--samples N] [--calib N] [--backend ort|tract] [--batch N]
                         [--trtkit-arg=…] [--compare-arg=…] [--md FILE]
"""
import argparse
import os
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from int8_triage import PHOTO_TYPES, crops, floats_arg, input_of, run_trtkit, size_arg  # noqa: E402


def task_cells(task, found):
    """The row's task figures from a compare report."""
    t = found.get("task") or {}
    if task == "detect":
        d = t.get("detect") or {}
        pct = lambda k: "-" if d.get(k) is None else f"{d[k]:.2f}"
        num = lambda k, spec: "-" if d.get(k) is None else format(d[k], spec)
        return [f"{d.get('boxes_a', '-')} / {d.get('boxes_b', '-')}", pct("matched_50_pct"),
                pct("matched_75_pct"), str(d.get("only_a", "-")), str(d.get("only_b", "-")),
                num("score_shift_mean", "+.4f"), num("map50", ".4f"), num("map50_95", ".4f")]
    s = t.get("segment") or {}
    changed = s.get("most_changed") or []
    return ["-" if s.get("pixel_agreement_pct") is None else f"{s['pixel_agreement_pct']:.3f}",
            "-" if s.get("miou") is None else f"{s['miou']:.4f}",
            f"{changed[0]['class']} ({changed[0]['changed']} px)" if changed else "-"]


HEADERS = {"detect": ["boxes A / B", "matched @0.5 %", "matched @0.75 %", "only A", "only B",
                      "score shift", "mAP@0.5", "mAP@0.5:0.95"],
           "segment": ["pixel agreement %", "mIoU", "most changed class"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trtkit", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--photos", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--size", type=size_arg, required=True, help="H or HxW of the model's input")
    p.add_argument("--task", choices=["detect", "segment"], required=True)
    p.add_argument("--mean", type=floats_arg, default=floats_arg("0,0,0"))
    p.add_argument("--std", type=floats_arg, default=floats_arg("1,1,1"))
    p.add_argument("--bgr", action="store_true", help="feed channels in BGR order")
    p.add_argument("--samples", type=int, default=32)
    p.add_argument("--calib", type=int, default=64)
    p.add_argument("--backend", default="ort")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--trtkit-arg", action="append", default=[],
                   help="an extra argument for trtkit's calibrate and compare (repeat), e.g. the "
                        "image size of a model whose height and width are symbolic: "
                        "--trtkit-arg=--dim --trtkit-arg=height=320")
    p.add_argument("--compare-arg", action="append", default=[],
                   help="an extra argument for trtkit compare alone (repeat), e.g. --compare-arg=--conf=0.1")
    p.add_argument("--md", help="also write the table here")
    args = p.parse_args()

    os.makedirs(os.path.join(args.work, "calib"), exist_ok=True)
    w = lambda *parts: os.path.join(args.work, *parts)
    names = sorted(f for f in os.listdir(args.photos) if f.lower().endswith(PHOTO_TYPES))
    if not names:
        sys.exit(f"{args.photos}: no photos (.png/.jpg)")
    photos = [Image.open(os.path.join(args.photos, f)).convert("RGB") for f in names]
    name, _ = input_of(args.trtkit, args.model)
    if name is None:
        sys.exit(f"{args.model}: trtkit inspect could not read its input")

    def cut(n, seed):
        x = crops(photos, n, args.size, seed, args.mean, args.std)
        return np.ascontiguousarray(x[:, ::-1]) if args.bgr else x

    np.savez(w("inputs.npz"), **{name: cut(args.samples, 2)})
    np.save(w("calib", "samples.npy"), cut(args.calib, 1))
    print(f"{len(photos)} photos; {args.samples} evaluation and {args.calib} calibration crops "
          f"{args.size[0]}x{args.size[1]}", flush=True)

    backend = ["--backend", args.backend] if args.backend else []
    _, _, err = run_trtkit(args.trtkit, ["quantize", args.model, "--fp16", "--no-check", "-o", w("fp16.onnx"), *backend], parse=False)
    if err:
        sys.exit(f"trtkit quantize --fp16: {err}")
    found, _, err = run_trtkit(args.trtkit, [
        "calibrate", args.model, "--calib-data", w("calib"), "--batch-size", "8",
        "--cache-dir", w("cal"), "--algo", "entropy", "--recalibrate", "--json", *backend,
        *args.trtkit_arg])
    if err:
        sys.exit(f"trtkit calibrate: {err}")
    cache = found["caches"][0]["cache"]
    _, _, err = run_trtkit(args.trtkit, ["quantize", args.model, "--int8", "--calibration-cache", cache,
                                         "--no-check", "-o", w("int8.onnx"), *backend], parse=False)
    if err:
        sys.exit(f"trtkit quantize --int8: {err}")

    headers = ["Precision", *HEADERS[args.task], "cosine", "task s", "models s"]
    rows = []
    for label, path in [("fp16", w("fp16.onnx")), ("int8", w("int8.onnx"))]:
        found, _, err = run_trtkit(args.trtkit, [
            "compare", path, args.model, "--inputs", w("inputs.npz"), "--task", args.task,
            "--batch-size", str(args.batch), "--json", *backend, *args.trtkit_arg, *args.compare_arg])
        if err:
            rows.append([label, f"failed: {err}"] + ["-"] * (len(headers) - 2))
            continue
        outputs = found.get("outputs") or [{}]
        cosine = (outputs[0].get("closeness") or {}).get("cosine")
        models_s = sum(s["inference_s"] for s in found["sides"])
        rows.append([label, *task_cells(args.task, found),
                     "-" if cosine is None else f"{cosine:.6f}",
                     f"{(found.get('task') or {}).get('seconds', 0):.3f}", f"{models_s:.2f}"])
    table = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    table += ["| " + " | ".join(r) + " |" for r in rows]
    print("\n".join(table))
    if args.md:
        with open(args.md, "w") as f:
            f.write("\n".join(table) + "\n")


if __name__ == "__main__":
    main()
