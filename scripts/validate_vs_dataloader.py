#!/usr/bin/env python3
"""`trtkit validate` beside the PyTorch DataLoader loop it replaces: same images, same model, one run.

The loop it replaces (the "anchor"), as people write it:

    ds = torchvision.datasets.ImageFolder(DIR, transform=Compose([Resize(256), CenterCrop(224),
                                                                  ToTensor(), Normalize(mean, std)]))
    for x, y in DataLoader(ds, batch_size=B, num_workers=cores, pin_memory=True, shuffle=False):
        x = x.cuda(non_blocking=True).to(memory_format=torch.channels_last).half()
        out = model(x)               # torchvision model, eval, .half(), channels_last,
                                     # cudnn.benchmark, under torch.inference_mode()
        ...top-1 / top-5 hits counted on the GPU...
    torch.cuda.synchronize()

and trtkit on the same folder and the same weights:

    trtkit quantize MODEL.onnx --fp16 -o MODEL-fp16.onnx    (once, untimed: trtkit's FP16 rewrite,
                                                             float32 I/O behind Casts)
    trtkit validate MODEL-fp16.onnx --dataset DIR --backend ort --device cuda --nhwc
                    --batch-size B --warmup SKIP --json

Each run is its own process, in alternating rounds (trtkit, torch, torch-loader-only, trtkit, ...),
so a passing disturbance hits one round of each side rather than one side. Figures per run:

  - wall_s: trtkit: process start to exit, measured here around the subprocess (it includes
    ONNX Runtime's session creation). torch: from ImageFolder's and the DataLoader's creation to
    the last result (torch.cuda.synchronize()), as the loop's own timer would put it; the import
    of torch, CUDA's start and the model's move to the GPU come before it (setup_s), and
    process_s is that process's start to exit, the figure to set beside trtkit's wall_s.
  - steady_images_per_s: trtkit: its own `steady_images_per_s` (with --warmup SKIP: images after
    the first SKIP batches over the time from the end of batch SKIP to the end). torch: over whole
    DataLoader waves past its prefetch buffer. Each of the W workers makes whole batches and all
    start at once (worker w makes batches w, w + W, ...), so batches arrive W at a time; and the
    workers run prefetch_factor (2) batches ahead, so while the first model call stalls on cuDNN's
    autotuning they fill 2W batches that the loop then drains at the GPU's rate. Counted from
    batch SKIP to the end, those look free: on an H200 with 8192 images in batches of 256 on 16
    workers (exactly the buffer), that count gave the loop 13,200 images/s, twice the 6,400 of
    its own DataLoader alone counted the same way. So torch's window runs from the end of batch a (the first multiple of W past 2W
    batches and past batch SKIP) to the end of the last whole wave; the count from batch SKIP to
    the end is kept as steady_after_skip_images_per_s, and is the only figure when the dataset
    has no whole wave past the buffer (a warning says so). Hence --count's default of 32768:
    128 batches of 256, 6 waves of 16 in the window. trtkit's loader fills each batch with all
    its threads, in order, into a ring of 4 batches: no waves, a small buffer.
  - cpu_s and max_rss_bytes: the process's user + system CPU seconds, its DataLoader workers or
    threads included, and the largest resident set of one process (from wait4); trtkit's own
    peak_rss_bytes, time_split and loader figures where its JSON has them ("-" otherwise).
  - torch-loader-only: the same DataLoader iterated (decode, transform, collate, pin) with no
    copy and no model: what the input pipeline alone delivers.

Before the first round every image is read once, untimed, so both sides read them from the
page cache. The model has random weights seeded with --seed (pretrained ones need the internet):
the labels are arbitrary for it, so top-1 only shows that both sides ran the same images (it
differs a little in FP16); --check-agreement adds one untimed pair of runs that saves every
image's top-5 on both sides and prints how often the two top-1 classes agree.

Run, on a machine with an NVIDIA GPU, torch, torchvision, onnx and onnxruntime-gpu:

    python3 scripts/validate_vs_dataloader.py --trtkit /tmp/trtkit \\
        --make-images /tmp/vvd/images --count 32768 --model resnet50 --batch-size 256 --rounds 3

--make-images DIR makes the dataset if DIR does not exist yet (16 class folders 000..015 of
500x375 JPEGs, quality 90, smooth gradients, hard-edged shapes and noise from the seed: 50-85 KB
each, about 67 KB on average; one process per core, 8192 in 15 s on 16 cores) and needs only PIL
and numpy: `--make-images DIR --images-only` stops there. --dataset DIR takes an existing folder.
The ONNX model is exported once to --work (default: DIR's parent) as MODEL.onnx (opset 17, FP32,
dynamic batch, IR version at most 10, as ONNX Runtime 1.31 refuses 14), or given with --onnx
(then the anchor's weights are not the ONNX model's: top-1 will not match).

Output: one JSON line per run on stdout ({"side": "trtkit"|"torch"|"torch-loader-only",
"round": i, ...}); the medians over rounds per side and the trtkit/torch ratios on stderr.
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
CLASSES = 16
SIDES = ("trtkit", "torch", "torch-loader-only")


def cores():
    """CPUs this process may run on (the cgroup / affinity's, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# --------------------------------------------------------------------------------------------
# The dataset: photo-like JPEGs, made in parallel, the same bytes for the same seed.

def photo_like(w, h, seed):
    """Smooth colour fields, hard-edged shapes, fine periodic texture and sensor-like noise (the
    approach of make_parity_fixture.photo_like, with separable gradients so that it is fast, and
    no blur, so that quality-90 files have photo sizes)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    x = np.arange(w, dtype=np.float32)
    y = np.arange(h, dtype=np.float32)
    img = np.empty((h, w, 3), np.float32)
    for c in range(3):
        plane = np.full((h, w), rng.uniform(70, 180), np.float32)
        for _ in range(4):
            fx, fy = rng.uniform(0.002, 0.03, 2)
            px, py = rng.uniform(0, 6.28, 2)
            plane += np.float32(rng.uniform(20, 50)) * np.outer(np.cos(fy * y + py), np.sin(fx * x + px))
        img[..., c] = plane
    for _ in range(6):  # hard-edged objects
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(10, min(w, h) / 3)
        colour = rng.uniform(0, 255, 3).astype(np.float32)
        x0, x1 = int(max(cx - r, 0)), int(min(cx + r + 1, w))
        y0, y1 = int(max(cy - r, 0)), int(min(cy + r + 1, h))
        if x0 >= x1 or y0 >= y1:
            continue
        yy, xx = np.ogrid[y0:y1, x0:x1]
        inside = (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
        patch = img[y0:y1, x0:x1]
        patch[inside] = patch[inside] * 0.4 + colour * 0.6
    img += rng.standard_normal(img.shape, dtype=np.float32) * np.float32(rng.uniform(6, 14))
    img[::7] += 12  # fine periodic texture (fabric, fences)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def _make_chunk(job):
    directory, seed, indices = job
    total = 0
    for i in indices:
        path = os.path.join(directory, f"{i % CLASSES:03d}", f"img{i:05d}.jpg")
        photo_like(500, 375, seed * 1_000_003 + i).save(path, quality=90)
        total += os.path.getsize(path)
    return total


def make_images(directory, count, seed, procs):
    """Makes `directory` (class folders 000..015) unless it exists; built beside it and renamed
    into place at the end, so an interrupted run leaves no half-made dataset behind."""
    directory = os.path.abspath(directory)
    if os.path.exists(directory):
        return False
    tmp = f"{directory}.tmp-{os.getpid()}"
    for c in range(CLASSES):
        os.makedirs(os.path.join(tmp, f"{c:03d}"), exist_ok=True)
    step = max(1, min(64, count // (procs * 4) or 1))
    jobs = [(tmp, seed, range(i, min(i + step, count))) for i in range(0, count, step)]
    start = time.perf_counter()
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    with ctx.Pool(procs) as pool:
        total = sum(pool.imap_unordered(_make_chunk, jobs))
    os.rename(tmp, directory)
    log(f"made {count} JPEGs (500x375, quality 90, {CLASSES} classes, seed {seed}) in {directory}: "
        f"{total / 2**20:.0f} MiB, {total / max(count, 1) / 1000:.1f} KB each on average, "
        f"{time.perf_counter() - start:.1f} s on {procs} processes")
    return True


def image_files(directory):
    out = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        out.extend(os.path.join(root, f) for f in sorted(files)
                   if f.lower().endswith((".jpg", ".jpeg", ".png")))
    return out


def describe_images(files, sample=32):
    """Sizes of the files and the pixel size of a spread sample of them, each opened and decoded."""
    from PIL import Image

    sizes = [os.path.getsize(f) for f in files]
    dims = set()
    for f in files[:: max(1, len(files) // sample)]:
        with Image.open(f) as im:
            im.load()
            dims.add(im.size)
    classes = len({os.path.basename(os.path.dirname(f)) for f in files})
    return {"images": len(files), "classes": classes, "bytes": sum(sizes),
            "kb_min": min(sizes) / 1000, "kb_mean": sum(sizes) / len(sizes) / 1000,
            "kb_max": max(sizes) / 1000, "pixel_sizes": sorted(dims)}


def warm_page_cache(paths):
    """Reads every file once, untimed, so both sides read from memory."""
    start, total = time.perf_counter(), 0
    for p in paths:
        with open(p, "rb") as fh:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                total += len(chunk)
    return total, time.perf_counter() - start


# --------------------------------------------------------------------------------------------
# The model: torchvision, seeded random weights, exported once.

def seeded_model(name, seed):
    import torch
    import torchvision

    torch.manual_seed(seed)
    return torchvision.models.get_model(name, weights=None).eval()


def export_onnx(name, seed, path, opset=17):
    import torch

    model = seeded_model(name, seed)
    dummy = torch.randn(1, 3, 224, 224)
    tmp = f"{path}.tmp-{os.getpid()}"
    kwargs = dict(input_names=["input"], output_names=["logits"], opset_version=opset,
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    start = time.perf_counter()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch >= 2.9 on the TorchScript exporter
        try:
            torch.onnx.export(model, dummy, tmp, dynamo=False, **kwargs)
        except TypeError:  # a torch without the dynamo switch: its only exporter is this one
            torch.onnx.export(model, dummy, tmp, **kwargs)
    with torch.inference_mode():
        top = model(dummy).abs().max().item()
    import onnx

    m = onnx.load(tmp)
    ir = m.ir_version
    m.ir_version = min(m.ir_version, 10)
    onnx.save(m, tmp)
    if os.path.exists(tmp + ".data"):
        os.remove(tmp + ".data")
    os.replace(tmp, path)
    opsets = ",".join(f"{o.domain or 'ai.onnx'}:{o.version}" for o in m.opset_import)
    log(f"exported {name} (seed {seed}, FP32, dynamic batch) to {path}: "
        f"{os.path.getsize(path) / 2**20:.1f} MiB, opset {opsets}, IR version {ir}"
        + (f" written as {m.ir_version}" if m.ir_version != ir else "")
        + f", export {time.perf_counter() - start:.1f} s; largest |logit| on one random input {top:.3g}")
    if not top < 6e4:
        log("warning: the random model's logits reach float16's range; FP16 results may be inf/NaN")


def fp16_rewrite(trtkit, src, dst):
    """trtkit's FP16 rewrite (`quantize --fp16`, float32 I/O behind Casts), untimed."""
    cmd = [trtkit, "quantize", src, "--fp16", "-o", dst]
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}\n{(done.stdout + done.stderr)[-3000:]}")
    log(f"{' '.join(cmd)}: {time.perf_counter() - start:.1f} s, "
        f"{os.path.getsize(dst) / 2**20:.1f} MiB")


# --------------------------------------------------------------------------------------------
# Running one side: a child process, timed here, with its resource use from wait4.

def run_measured(cmd, env=None, timeout=None):
    """Runs `cmd`; returns (exit code, stdout, stderr, seconds start to exit, CPU seconds of it
    and its waited-for children, largest resident set of one of them in bytes)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        timer = threading.Timer(timeout, child.kill) if timeout else None
        if timer:
            timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            if timer:
                timer.cancel()
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text_out = out.read().decode(errors="replace")
        text_err = err.read().decode(errors="replace")
    rss = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return child.returncode, text_out, text_err, wall, usage.ru_utime + usage.ru_stime, rss


def last_json(text):
    """The JSON document of a command's stdout: the whole of it, else its last line that is one."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise ValueError("no JSON in its output")


def run_trtkit(args, model, round_no, predictions=None):
    cmd = [args.trtkit, "validate", model, "--dataset", args.dataset, "--backend", "ort",
           "--device", "cuda", "--nhwc", "--batch-size", str(args.batch_size),
           "--warmup", str(args.skip_batches), "--json", *args.trtkit_arg]
    if predictions:
        cmd += ["--save-predictions", predictions]
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.workers))
    code, out, err, wall, cpu, rss = run_measured(cmd, env, args.timeout)
    if code != 0:
        sys.exit(f"{' '.join(cmd)}: exit {code}\n{(out + err)[-3000:]}")
    r = last_json(out)
    images = r.get("images")
    return {
        "side": "trtkit", "round": round_no, "images": images,
        "wall_s": wall, "process_s": wall,
        "steady_images_per_s": r.get("steady_images_per_s"),
        "images_per_s": images / wall if images else None,
        "top1": r.get("top1"), "top5": r.get("top5"),
        "cpu_s": cpu, "max_rss_bytes": rss,
        "batch_size": r.get("batch_size"), "warmup_batches": r.get("warmup_batches"),
        "threads": args.workers, "backend": r.get("backend"),
        "trtkit_wall_s": r.get("wall_s"), "trtkit_images_per_s": r.get("images_per_s"),
        "time_split": r.get("time_split"), "loader": r.get("loader"),
        "peak_rss_bytes": r.get("peak_rss_bytes"),
        "latency_all_ms": (r.get("latency_all") or {}).get("mean_ms"),
        "latency_model_ms": (r.get("latency_model") or {}).get("mean_ms"),
        "skipped": r.get("skipped"), "model": model,
    }


def run_torch(args, side, round_no, predictions=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", side, "--dataset", args.dataset,
           "--model", args.model, "--seed", str(args.seed), "--batch-size", str(args.batch_size),
           "--workers", str(args.workers), "--skip-batches", str(args.skip_batches),
           "--precision", args.precision]
    if predictions:
        cmd += ["--child-predictions", predictions]
    code, out, err, wall, cpu, rss = run_measured(cmd, None, args.timeout)
    if code != 0:
        sys.exit(f"{' '.join(cmd)}: exit {code}\n{(out + err)[-3000:]}")
    r = last_json(out)
    r.update({"side": side, "round": round_no, "process_s": wall, "cpu_s": cpu, "max_rss_bytes": rss})
    return r


def anchor(args):
    """The child process of a torch row: the DataLoader loop, timed from within."""
    t_start = time.perf_counter()
    import torch
    import torchvision
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    if not torch.cuda.is_available():
        sys.exit("CUDA is not available to torch; the anchor needs a GPU")
    loader_only = args.child == "torch-loader-only"
    fp16 = args.precision == "fp16"
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    model = None
    if not loader_only:
        model = seeded_model(args.model, args.seed).to(dev, memory_format=torch.channels_last)
        if fp16:
            model = model.half()
    torch.zeros(1, device=dev)
    torch.cuda.synchronize()
    setup_s = time.perf_counter() - t_start

    skip = args.skip_batches
    transform = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224),
                                    transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    t0 = time.perf_counter()
    ds = datasets.ImageFolder(args.dataset, transform=transform)
    loader = DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers, pin_memory=True,
                        shuffle=False, persistent_workers=False)
    # Each DataLoader worker makes whole batches, and all of them start at once (worker w makes
    # batches w, w + W, ...), so batches arrive W at a time, in waves. And the workers run ahead
    # of the loop by prefetch_factor batches each: while the first model call stalls (cuDNN's
    # autotuning, seconds) they fill that buffer, and the loop then drains it at the GPU's rate.
    # So the steady window starts at the end of batch a, the first multiple of W that is past
    # both the buffer (prefetch_factor * W batches) and batch SKIP, and ends at the end of the
    # last whole wave, b. Counted from batch SKIP to the end instead, the buffered batches look
    # free: 8192 images in batches of 256 on 16 workers are exactly the buffer, and that count
    # gave the loop twice the rate of its own DataLoader alone.
    n_batches = len(loader)
    waves = args.workers > 0
    w = max(args.workers, 1)
    ahead = (getattr(loader, "prefetch_factor", None) or 2) * w if waves else 0
    a = max(ahead, -(-skip // w) * w) if waves else skip
    b = (n_batches // w) * w if waves else n_batches
    enough = (ahead + 4 * w) * args.batch_size  # images for 4 whole waves in the window
    marks = {m for m in (skip, a, b) if 0 < m <= n_batches}
    t_at, n_at = {0: t0}, {0: 0}
    kept = []
    images = batches = 0
    t_first = None
    with torch.inference_mode():
        hits1 = torch.zeros((), dtype=torch.int64, device=dev)
        hits5 = torch.zeros((), dtype=torch.int64, device=dev)
        for x, y in loader:
            if not loader_only:
                x = x.cuda(non_blocking=True).to(memory_format=torch.channels_last)
                if fp16:
                    x = x.half()
                y = y.cuda(non_blocking=True)
                top5 = model(x).topk(5, dim=1).indices
                hits1 += (top5[:, 0] == y).sum()
                hits5 += (top5 == y[:, None]).any(dim=1).sum()
                if args.child_predictions:
                    kept.append(top5)
            images += len(y)
            batches += 1
            if batches == 1:
                t_first = time.perf_counter()
            if batches in marks:
                torch.cuda.synchronize()
                t_at[batches], n_at[batches] = time.perf_counter(), images
    torch.cuda.synchronize()
    t_end = time.perf_counter()
    t_at[batches], n_at[batches] = t_end, images
    wall = t_end - t0

    def rate(i, j):
        if i in t_at and j in t_at and j > i and t_at[j] > t_at[i]:
            return (n_at[j] - n_at[i]) / (t_at[j] - t_at[i])
        return None

    after_skip = rate(skip, batches)
    steady = rate(a, b)
    over = "waves" if steady is not None and waves else "after-skip"
    window = [a, b] if steady is not None else [skip, batches]
    if steady is None:
        steady = after_skip
    if args.child_predictions and kept:
        top5 = torch.cat(kept).cpu().tolist()
        with open(args.child_predictions, "w") as fh:
            fh.write("file,label,top1,top2,top3,top4,top5\n")
            for (path, label), t in zip(ds.samples, top5):
                fh.write(f"{path},{label}," + ",".join(map(str, t)) + "\n")
    result = {
        "images": images, "batches": batches, "wall_s": wall, "setup_s": setup_s,
        "first_batch_s": (t_first - t0) if t_first else None,
        "steady_images_per_s": steady, "steady_window_batches": window,
        "steady_over": over, "images_for_steady": enough,
        "steady_after_skip_images_per_s": after_skip,
        "images_per_s": images / wall if wall > 0 else None,
        "top1": None if loader_only else hits1.item() / max(images, 1),
        "top5": None if loader_only else hits5.item() / max(images, 1),
        "batch_size": args.batch_size, "workers": args.workers, "skip_batches": skip,
        "precision": args.precision, "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__, "torchvision": torchvision.__version__,
    }
    print(json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# The report.

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def median(rows, key):
    vals = [r.get(key) for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(vals) if vals else None


def fmt(v, spec=".1f", scale=1.0):
    return "-" if v is None else format(v * scale, spec)


def ratio(a, b):
    return None if a is None or not b else a / b


def read_top1(path):
    """Relative path (class/file) -> top-1 class, from a `file,label,top1..top5` CSV."""
    import csv

    out = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            parts = row["file"].replace("\\", "/").split("/")
            out["/".join(parts[-2:])] = row["top1"]
    return out


def check_agreement(args, model):
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "trtkit.csv"), os.path.join(tmp, "torch.csv")
        run_trtkit(args, model, -1, predictions=a)
        run_torch(args, "torch", -1, predictions=b)
        ta, tb = read_top1(a), read_top1(b)
    common = set(ta) & set(tb)
    same = sum(ta[k] == tb[k] for k in common)
    classes = len({tb[k] for k in common})
    row = {"side": "agreement", "images_trtkit": len(ta), "images_torch": len(tb),
           "images_both": len(common), "top1_agreement": same / len(common) if common else None,
           "distinct_top1_classes_torch": classes}
    print(json.dumps(row), flush=True)
    log(f"top-1 agreement trtkit vs torch (untimed runs with every image's top-5 saved): "
        f"{fmt(row['top1_agreement'], '.2f', 100)}% of {len(common)} images in both "
        f"(trtkit {len(ta)}, torch {len(tb)}); torch's top-1 takes {classes} distinct classes "
        f"(a random model that puts every image in one class agrees trivially)")


def report(rows, args, header):
    by = {s: [r for r in rows if r["side"] == s] for s in SIDES}
    log("")
    log(header)
    cols = ("side", "runs", "wall s", "process s", "setup s", "steady img/s", "img/s (wall)",
            "cpu s", "max rss MiB", "top-1 %", "top-5 %")
    widths = (18, 4, 8, 9, 7, 12, 12, 8, 11, 8, 8)
    log("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths))))
    med = {}
    for side, rs in by.items():
        if not rs:
            continue
        m = {k: median(rs, k) for k in ("wall_s", "process_s", "setup_s", "steady_images_per_s",
                                        "images_per_s", "cpu_s", "max_rss_bytes", "top1", "top5",
                                        "peak_rss_bytes", "images")}
        med[side] = m
        cells = (side, str(len(rs)), fmt(m["wall_s"], ".2f"), fmt(m["process_s"], ".2f"),
                 fmt(m["setup_s"], ".2f"), fmt(m["steady_images_per_s"]), fmt(m["images_per_s"]),
                 fmt(m["cpu_s"]), fmt(m["max_rss_bytes"], ".0f", 2**-20),
                 fmt(m["top1"], ".2f", 100), fmt(m["top5"], ".2f", 100))
        log("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))))
    log("medians over rounds. wall s: trtkit, process start to exit; torch, ImageFolder + DataLoader "
        "creation to the last result (setup s, the import of torch, CUDA and the model, comes before "
        "it; process s is the whole process, start to exit). steady: trtkit, after its first "
        f"{args.skip_batches} batches; torch, over whole DataLoader waves past the workers' prefetch "
        f"buffer and batch {args.skip_batches} (below). cpu s: the process and its workers; max rss: the largest "
        "one process. Page cache warmed before the first round: every image read from memory.")
    for side in ("torch", "torch-loader-only"):
        rs = by[side]
        if not rs:
            continue
        window = rs[0].get("steady_window_batches") or ["-", "-"]
        waves = rs[0].get("steady_over") == "waves"
        log(f"{side} steady: batches {window[0] + 1 if isinstance(window[0], int) else '-'}.."
            f"{window[1]} of {rs[0].get('batches')}"
            + (f" (whole DataLoader waves after the workers' prefetch buffer: each of the "
               f"{args.workers} workers makes whole batches, so they arrive {args.workers} at a time)"
               if waves and args.workers else "")
            + f"; counted from batch {args.skip_batches} to the end, as trtkit counts: "
            f"{fmt(median(rs, 'steady_after_skip_images_per_s'))} img/s; first batch after "
            f"{fmt(median(rs, 'first_batch_s'), '.2f')} s")
        if not waves and args.workers > 0:
            log(f"  warning: no whole DataLoader wave after the workers' prefetch buffer; the torch "
                f"steady figure counts buffered batches as free and is not the loop's rate. Use "
                f"--count {rs[0].get('images_for_steady', '-')} or more, or a smaller --batch-size.")
        elif args.workers > 0 and rs[0].get("images", 0) < (rs[0].get("images_for_steady") or 0):
            log(f"  note: fewer than 4 whole waves in the window; --count "
                f"{rs[0].get('images_for_steady')} or more gives a steadier figure.")
    t, p = med.get("trtkit"), med.get("torch")
    if t and p:
        log("")
        log(f"trtkit / torch: steady images/s {fmt(ratio(t['steady_images_per_s'], p['steady_images_per_s']), '.2f')}x; "
            f"images/s over the wall {fmt(ratio(t['images_per_s'], p['images_per_s']), '.2f')}x")
        log(f"                wall time {fmt(ratio(t['wall_s'], p['wall_s']), '.2f')}x "
            f"(trtkit's process vs torch's loop), process time "
            f"{fmt(ratio(t['process_s'], p['process_s']), '.2f')}x (both start to exit); "
            f"CPU seconds {fmt(ratio(t['cpu_s'], p['cpu_s']), '.2f')}x  (below 1: trtkit takes less)")
        per_round = []
        for tr in by["trtkit"]:
            pr = next((r for r in by["torch"] if r["round"] == tr["round"]), None)
            v = ratio(tr.get("steady_images_per_s"), pr.get("steady_images_per_s")) if pr else None
            per_round.append(fmt(v, ".2f") + "x")
        log(f"per round, steady images/s trtkit / torch: {', '.join(per_round)}")
        log(f"top-1 trtkit {fmt(t['top1'], '.3f', 100)}%, torch {fmt(p['top1'], '.3f', 100)}% "
            f"(random weights, arbitrary labels: this only shows that both ran the same "
            f"{fmt(t['images'], '.0f')} / {fmt(p['images'], '.0f')} images; FP16 on both sides differs a little)")
    lo = med.get("torch-loader-only")
    if lo and t:
        log(f"trtkit's whole validate vs torch's DataLoader alone (no model): steady images/s "
            f"{fmt(ratio(t['steady_images_per_s'], lo['steady_images_per_s']), '.2f')}x")
    if by["trtkit"]:
        splits = [r["time_split"] for r in by["trtkit"] if isinstance(r.get("time_split"), dict)]
        if splits:
            keys = [k for k in ("wait_images_s", "h2d_s", "model_s", "d2h_s", "scoring_s") if k in splits[0]]
            keys += [k for k in splits[0] if k not in keys]
            log("trtkit time split, median s: " + ", ".join(
                f"{k} {fmt(statistics.median(s.get(k) or 0 for s in splits), '.3f')}" for k in keys))
        else:
            log("trtkit time split: - (this binary's JSON has no time_split)")
        loaders = [r["loader"] for r in by["trtkit"] if isinstance(r.get("loader"), dict)]
        if loaders:
            log(f"trtkit loader: {loaders[0].get('threads', '-')} threads, decode + preprocess "
                f"{fmt(median(loaders, 'images_per_s'))} images/s on its own (median)"
                + (f"; torch's DataLoader alone: {fmt(lo['steady_images_per_s'])} images/s steady" if lo else ""))
        else:
            log("trtkit loader: - (this binary's JSON has no loader figures)")
        log(f"trtkit peak RSS (its own figure): {fmt(t['peak_rss_bytes'] if t else None, '.0f', 2**-20)} MiB")


# --------------------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    data = ap.add_mutually_exclusive_group()
    data.add_argument("--make-images", metavar="DIR",
                      help="the dataset folder, made (--count JPEGs in 16 class folders) if it does not exist")
    data.add_argument("--dataset", metavar="DIR", help="an existing ImageFolder-style dataset")
    ap.add_argument("--count", type=int, default=32768,
                    help="images --make-images makes (default: 32768; see steady_images_per_s above: fewer leave the torch loop no steady window at batch 256 on 16 workers)")
    ap.add_argument("--images-only", action="store_true",
                    help="make (or describe) the images and stop; needs only PIL and numpy")
    ap.add_argument("--model", default="resnet50", help="torchvision model name (default: resnet50)")
    ap.add_argument("--onnx", help="ONNX file for trtkit instead of exporting --model (its weights "
                                   "are then not the anchor's)")
    ap.add_argument("--work", help="folder of the exported and rewritten models (default: the dataset's parent)")
    ap.add_argument("--precision", choices=("fp16", "fp32"), default="fp16",
                    help="fp16 (default): trtkit's FP16 rewrite vs model.half(); fp32: the exported model vs float")
    ap.add_argument("--trtkit", default="trtkit", help="the trtkit binary (default: trtkit on PATH)")
    ap.add_argument("--trtkit-arg", action="append", default=[], metavar="ARG",
                    help="extra flag for every trtkit validate run (repeat; e.g. --trtkit-arg=--prefetch=8)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workers", type=int, default=cores(),
                    help="DataLoader workers, and trtkit's loader threads (RAYON_NUM_THREADS) "
                         "(default: the CPUs this process may use)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-batches", type=int, default=3,
                    help="batches left out of the steady rate (trtkit: --warmup) (default: 3)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the images and of the weights")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--trtkit-only", action="store_true")
    only.add_argument("--anchor-only", action="store_true", help="the torch rows only")
    only.add_argument("--loader-only", action="store_true", help="the torch-loader-only row only")
    ap.add_argument("--no-loader-only", action="store_true", help="leave out the torch-loader-only row")
    ap.add_argument("--check-agreement", action="store_true",
                    help="after the rounds, one untimed pair of runs comparing every image's top-1")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one run may take (default: 1800)")
    ap.add_argument("--child", choices=("torch", "torch-loader-only"), help=argparse.SUPPRESS)
    ap.add_argument("--child-predictions", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return args
    if not (args.make_images or args.dataset):
        ap.error("give --make-images DIR (made if missing) or --dataset DIR")
    for flag in ("count", "batch_size", "workers", "rounds"):
        if getattr(args, flag) < 1:
            ap.error(f"--{flag.replace('_', '-')} must be at least 1")
    if args.skip_batches < 0:
        ap.error("--skip-batches must be 0 or more")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        return anchor(args)
    directory = os.path.abspath(args.make_images or args.dataset)
    if args.make_images:
        if not make_images(directory, args.count, args.seed, args.workers):
            log(f"{directory} exists: used as it is (not remade)")
    elif not os.path.isdir(directory):
        sys.exit(f"--dataset {directory} is not a folder")
    args.dataset = directory
    files = image_files(directory)
    if not files:
        sys.exit(f"no images in {directory}")
    info = describe_images(files)
    log(f"dataset {directory}: {info['images']} images in {info['classes']} folders, "
        f"{info['kb_min']:.0f}-{info['kb_max']:.0f} KB (mean {info['kb_mean']:.1f}), "
        f"pixel sizes {info['pixel_sizes']}")
    if args.images_only:
        print(json.dumps({"side": "images", "dataset": directory, **info}), flush=True)
        return 0

    sides = ["trtkit", "torch"] + ([] if args.no_loader_only else ["torch-loader-only"])
    if args.trtkit_only:
        sides = ["trtkit"]
    elif args.anchor_only:
        sides = [s for s in sides if s != "trtkit"]
    elif args.loader_only:
        sides = ["torch-loader-only"]

    model_path = None
    if "trtkit" in sides:
        found = shutil.which(args.trtkit)
        if not found:
            sys.exit(f"trtkit binary {args.trtkit!r} not found (give --trtkit PATH)")
        args.trtkit = os.path.abspath(found)
        work = os.path.abspath(args.work or os.path.dirname(directory))
        os.makedirs(work, exist_ok=True)
        if args.onnx:
            base = os.path.abspath(args.onnx)
            log(f"trtkit runs {base}: the anchor's {args.model} (seed {args.seed}) has other weights, "
                "so top-1 will not match")
        else:
            base = os.path.join(work, f"{args.model}.onnx")
            if os.path.exists(base):
                log(f"reusing {base} (delete it to export again)")
            else:
                export_onnx(args.model, args.seed, base)
        model_path = base
        if args.precision == "fp16":
            stem = os.path.splitext(os.path.basename(base))[0]
            model_path = os.path.join(work, f"{stem}-fp16.onnx")
            fp16_rewrite(args.trtkit, base, model_path)

    total, secs = warm_page_cache(files + ([model_path] if model_path else []))
    log(f"page cache: read all {len(files)} images ({total / 2**20:.0f} MiB) once, untimed, in "
        f"{secs:.1f} s, so both sides read them from memory")

    version = "-"
    if "trtkit" in sides:
        v = subprocess.run([args.trtkit, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        version = v.stdout.strip() or "-"
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) \
        if shutil.which("nvidia-smi") else None
    gpu_name = gpu.stdout.strip().splitlines()[0] if gpu and gpu.stdout.strip() else "-"
    rows = []
    for r in range(args.rounds):
        for side in sides:
            row = run_trtkit(args, model_path, r) if side == "trtkit" else run_torch(args, side, r)
            row["page_cache_warmed"] = True
            rows.append(row)
            print(json.dumps(row), flush=True)
            log(f"round {r} {side:<18} wall {fmt(row.get('wall_s'), '.2f')} s, process "
                f"{fmt(row.get('process_s'), '.2f')} s, steady {fmt(row.get('steady_images_per_s'))} img/s, "
                f"{row.get('images')} images, top-1 {fmt(row.get('top1'), '.3f', 100)}%")
    torch_row = next((r for r in rows if r["side"] != "trtkit"), {})
    header = (f"{args.model} {args.precision}, batch {args.batch_size}, {len(files)} images, "
              f"{args.workers} workers / loader threads on {cores()} CPUs, {args.rounds} round(s); "
              f"GPU {torch_row.get('gpu', gpu_name)}; {version}; torch {torch_row.get('torch', '-')}, "
              f"torchvision {torch_row.get('torchvision', '-')}")
    report(rows, args, header)
    if args.check_agreement and "trtkit" in sides and "torch" in sides:
        check_agreement(args, model_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
