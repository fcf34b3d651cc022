#!/usr/bin/env python3
"""Decode + ImageNet preprocessing throughput: trtkit beside torchvision + PIL, same files, one run.

Makes ImageNet-sized photo-like JPEGs (about 500x375, quality 90), then times
  - torchvision: Image.open(f).convert("RGB") -> Resize(256) -> CenterCrop(224) -> ToTensor()
    -> Normalize(mean, std), one process per core (as DataLoader workers), torch threads = 1;
  - trtkit: the same pipeline in Rust (examples/bench_preprocess.rs), rayon threads.
Both at 1 core and at --cores cores. Prints images/s, the per-core ratio and the scaling.
Without torchvision (e.g. no torch installed) PIL + numpy stands in for it, and says so.

Usage: python3 scripts/bench_preprocess.py --bin target/release/examples/bench_preprocess \
           [--images 96] [--cores N] [--rounds 3] [--dir /tmp/trtkit-bench-jpegs] [--json OUT]
"""
import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def make_images(directory, count):
    spec = importlib.util.spec_from_file_location("fixture", os.path.join(HERE, "make_parity_fixture.py"))
    fixture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixture)
    os.makedirs(directory, exist_ok=True)
    files = []
    for i in range(count):
        w, h = (500, 375) if i % 4 else (375, 500)
        path = os.path.join(directory, f"img{i:04d}.jpg")
        if not os.path.exists(path):
            fixture.photo_like(w, h, 1000 + i).save(path, quality=90)
        files.append(path)
    return files


def torchvision_transform():
    try:
        import torch
        from torchvision import transforms

        torch.set_num_threads(1)
        t = transforms.Compose([
            transforms.Resize(256),
            transforms.CenterCrop(224),
            transforms.ToTensor(),
            transforms.Normalize(MEAN.tolist(), STD.tolist()),
        ])
        return "torchvision", t
    except ImportError:
        def t(img):
            w, h = img.size
            if w <= h:
                nw, nh = 256, int(256 * h / w)
            else:
                nw, nh = int(256 * w / h), 256
            img = img.resize((nw, nh), Image.BILINEAR)
            top, left = int(round((nh - 224) / 2.0)), int(round((nw - 224) / 2.0))
            a = np.asarray(img.crop((left, top, left + 224, top + 224)), np.float32) / 255.0
            return ((a - MEAN) / STD).transpose(2, 0, 1).copy()
        return "PIL+numpy (torchvision not installed)", t


def _work(args):
    files, rounds = args
    _, t = torchvision_transform()
    for _ in range(rounds):
        for f in files:
            with open(f, "rb") as fh:
                t(Image.open(fh).convert("RGB"))
    return len(files) * rounds


def bench_python(files, rounds, procs):
    _work((files[:8], 1))  # warm-up: imports, page cache
    chunks = [files[i::procs] for i in range(procs)]
    with mp.get_context("fork").Pool(procs) as pool:
        pool.map(_work, [(c[:1], 1) for c in chunks])  # start the workers
        start = time.perf_counter()
        n = sum(pool.map(_work, [(c, rounds) for c in chunks]))
        secs = time.perf_counter() - start
    return n / secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="the bench_preprocess binary")
    ap.add_argument("--images", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    ap.add_argument("--dir", default="/tmp/trtkit-bench-jpegs")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    files = make_images(args.dir, args.images)
    name, _ = torchvision_transform()
    sizes = sorted({Image.open(f).size for f in files})
    print(f"{len(files)} JPEGs (sizes {sizes}, quality 90) in {args.dir}; {os.cpu_count()} CPUs visible")
    core_counts = [1] if args.cores == 1 else [1, args.cores]
    rust = {}
    out = subprocess.run([args.bin, args.dir, str(args.rounds)] + [str(c) for c in core_counts],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        r = json.loads(line)
        rust[r["threads"]] = r["images_per_s"]
    py = {c: bench_python(files, args.rounds, c) for c in core_counts}
    rows = []
    print(f"\n{'cores':>5}  {'trtkit img/s':>12}  {name + ' img/s':>34}  {'ratio':>6}  {'trtkit/core':>11}  {'python/core':>11}")
    for c in core_counts:
        rows.append({"cores": c, "trtkit": rust[c], "python": py[c], "python_impl": name,
                     "ratio": rust[c] / py[c]})
        print(f"{c:>5}  {rust[c]:>12.1f}  {py[c]:>34.1f}  {rust[c] / py[c]:>5.2f}x  {rust[c] / c:>11.1f}  {py[c] / c:>11.1f}")
    if len(core_counts) > 1:
        c = core_counts[-1]
        print(f"\nscaling 1 -> {c} cores: trtkit {rust[c] / rust[1]:.2f}x ({rust[c] / rust[1] / c * 100:.0f}% of linear), "
              f"python {py[c] / py[1]:.2f}x ({py[c] / py[1] / c * 100:.0f}% of linear)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"python_impl": name, "images": len(files), "rounds": args.rounds, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
