#!/usr/bin/env python3
"""Decode + ImageNet preprocessing throughput: trtkit beside torchvision + PIL, same files, one run.

Makes ImageNet-sized photo-like JPEGs (about 500x375, quality 90), then times
  - torchvision: Image.open(f).convert("RGB") -> Resize(256) -> CenterCrop(224) -> ToTensor()
    -> Normalize(mean, std), one process per core (as DataLoader workers), torch threads = 1;
  - trtkit: the same pipeline in Rust (examples/bench_preprocess.rs), as rayon threads in one
    process (what `trtkit validate` does) and as one single-threaded process per core;
  - a floor: trtkit's read + decode of the rows the crop needs, nothing else, as processes on
    1 and N cores (the decoder is libjpeg-turbo on both sides, so this bounds the ratio, and
    its scaling is what the decoder alone gets from this machine);
  - a control: a pure integer loop (Rust threads) and a pure Python loop (processes) on 1 and
    on N cores, which says how far this machine scales at all (SMT siblings, clock drop).
Both at 1 core and at --cores cores; every worker does the whole folder --rounds times (weak
scaling). The whole set of measurements is repeated --repeats times in turn (trtkit, python,
floor, trtkit, ...), so a passing disturbance hits one repeat of each side, not one side: the
figures are the medians over repeats, with each repeat's per-core ratio printed beside them.
Prints images/s, the per-core ratio and the scaling.
Without torchvision (e.g. no torch installed) PIL + numpy stands in for it, and says so.

Usage: python3 scripts/bench_preprocess.py --bin target/release/examples/bench_preprocess \
           [--images 96] [--cores N] [--rounds 3] [--trtkit-rounds 12] [--repeats 3]
           [--dir /tmp/trtkit-bench-jpegs]
           [--json OUT]
"""
import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import statistics
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
    """Every one of `procs` worker processes does all `files`, `rounds` times."""
    _work((files[:8], 1))  # warm-up: imports, page cache
    with mp.get_context("fork").Pool(procs) as pool:
        pool.map(_work, [(files[:2], 1)] * procs, chunksize=1)  # start the workers
        start = time.perf_counter()
        n = sum(pool.map(_work, [(files, rounds)] * procs, chunksize=1))
        secs = time.perf_counter() - start
    return n / secs


def _py_alu(seconds):
    x, n, end = 1, 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(10000):
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF
        n += 10000
    return n


def bench_py_alu(procs, seconds=2.0):
    with mp.get_context("fork").Pool(procs) as pool:
        pool.map(_py_alu, [0.05] * procs, chunksize=1)
        return sum(pool.map(_py_alu, [seconds] * procs, chunksize=1)) / seconds


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def bench_trtkit_procs(binary, directory, rounds, procs, mode="--process"):
    """`procs` single-threaded trtkit processes, all timed from the same instant."""
    start_ms = int(time.time() * 1000) + 3000
    children = [subprocess.Popen([binary, mode, directory, str(rounds), str(start_ms)],
                                 stdout=subprocess.PIPE, text=True) for _ in range(procs)]
    results = []
    for child in children:
        out, _ = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"{binary} {mode} failed")
        results.append(json.loads(out))
    return sum(r["images"] for r in results) / max(r["seconds"] for r in results)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="the bench_preprocess binary")
    ap.add_argument("--images", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trtkit-rounds", type=int, help="rounds for trtkit (default: 4 x --rounds, as it is faster)")
    ap.add_argument("--repeats", type=int, default=3, help="times the whole set is measured, in turn (medians reported)")
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    ap.add_argument("--dir", default="/tmp/trtkit-bench-jpegs")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    files = make_images(args.dir, args.images)
    name, _ = torchvision_transform()
    sizes = sorted({Image.open(f).size for f in files})
    print(f"{len(files)} JPEGs (sizes {sizes}, quality 90) in {args.dir}; {os.cpu_count()} CPUs visible")
    core_counts = [1] if args.cores == 1 else [1, args.cores]
    counts = [str(c) for c in core_counts]
    trounds = args.trtkit_rounds or 4 * args.rounds
    repeats = []
    for _ in range(max(1, args.repeats)):
        repeats.append({
            "rust": {r["threads"]: r["images_per_s"] for r in run_json([args.bin, args.dir, str(trounds)] + counts)},
            "rust_procs": {c: bench_trtkit_procs(args.bin, args.dir, trounds, c) for c in core_counts},
            "py": {c: bench_python(files, args.rounds, c) for c in core_counts},
            "decode_only": {c: bench_trtkit_procs(args.bin, args.dir, trounds, c, "--decode-only")
                            for c in core_counts},
        })

    def median(key):
        return {c: statistics.median(r[key][c] for r in repeats) for c in core_counts}

    rust, rust_procs, py, decode_only = (median(k) for k in ("rust", "rust_procs", "py", "decode_only"))
    alu = {r["threads"]: r["gsteps_per_s"] for r in run_json([args.bin, "--alu", "2"] + counts)}
    py_alu = {c: bench_py_alu(c) for c in core_counts}
    for c in core_counts:
        each = ", ".join(f"{max(r['rust'][c], r['rust_procs'][c]) / r['py'][c]:.2f}x" for r in repeats)
        print(f"{c} core(s), per repeat: trtkit (best of threads, processes) / python = {each}")
    rows = []
    print(f"\n{'cores':>5}  {'trtkit threads':>14}  {'trtkit procs':>12}  {name + ' img/s':>34}  "
          f"{'ratio thr':>9}  {'ratio proc':>10}  {'trtkit/core':>11}  {'python/core':>11}")
    for c in core_counts:
        best = max(rust[c], rust_procs[c])
        rows.append({"cores": c, "trtkit_threads": rust[c], "trtkit_processes": rust_procs[c],
                     "python": py[c], "python_impl": name, "ratio_threads": rust[c] / py[c],
                     "ratio_processes": rust_procs[c] / py[c],
                     "alu_rust_gsteps_per_s": alu[c], "alu_python_steps_per_s": py_alu[c]})
        print(f"{c:>5}  {rust[c]:>14.1f}  {rust_procs[c]:>12.1f}  {py[c]:>34.1f}  {rust[c] / py[c]:>8.2f}x  "
              f"{rust_procs[c] / py[c]:>9.2f}x  {best / c:>11.1f}  {py[c] / c:>11.1f}")
    if len(core_counts) > 1:
        c = core_counts[-1]

        def scale(d):
            return f"{d[c] / d[1]:.2f}x ({d[c] / d[1] / c * 100:.0f}% of linear)"

        print(f"\nscaling 1 -> {c} cores: trtkit threads {scale(rust)}, trtkit processes {scale(rust_procs)}, "
              f"python {scale(py)}")
        print(f"control (pure ALU loop) 1 -> {c} cores: Rust threads {scale(alu)}, Python processes {scale(py_alu)}")
    for c in core_counts:
        print(f"floor, {c} core(s): read + decode of the needed rows alone {decode_only[c]:.1f} img/s, "
              f"{decode_only[c] / py[c]:.2f}x {name} (trtkit's whole pipeline: "
              f"{max(rust[c], rust_procs[c]) / decode_only[c] * 100:.0f}% of that rate)")
    if len(core_counts) > 1:
        c = core_counts[-1]
        print(f"decoder alone 1 -> {c} cores: {decode_only[c] / decode_only[1]:.2f}x "
              f"({decode_only[c] / decode_only[1] / c * 100:.0f}% of linear)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"python_impl": name, "images": len(files), "rounds": args.rounds,
                       "trtkit_rounds": trounds, "repeats": repeats, "decode_only": decode_only,
                       "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
