#!/usr/bin/env python3
"""Runs Polygraphy and ONNX Runtime over the model corpus, cell by cell, beside trtkit.

The cells are the corpus test's (tests/model_corpus/cells.rs): inspect, run, compare,
fp16, compare-fp16, calibrate, int8, compare-int8, layerwise, build. For each the script runs
what a Polygraphy user and an ONNX Runtime (Python) user would run for the same job, on the
same model at the same input sizes (the manifest's shape flags, batch 1), and sorts the
outcome into: ok (exit 0), refused (non-zero exit with a short message of the tool's own),
raw (a traceback, a backend's error text or a crash), timeout, or n/a (no equivalent).
trtkit's outcome is read from tests/model_corpus/expected.tsv.

What each tool runs (S: `--input-shapes` from the manifest's shape flags, only for models that
have them; random inputs in Polygraphy's default range, floats in [0, 1), integers 0 or 1):

  cell          Polygraphy                                    ONNX Runtime (Python API)
  inspect       inspect model M                               n/a
  run           run M --onnxrt S                              one InferenceSession, one run
  compare       run M --onnxrt --onnxrt S                     two sessions of M, the same feed
  fp16          convert M --fp-to-fp16, then run it --onnxrt  transformers.float16 (keep_io_types),
                                                              then load and run it
  compare-fp16  run M --save-inputs/--save-outputs, then      sessions of M and of its FP16
                run FP16 --load-inputs/--load-outputs         rewrite, the same feed
  calibrate     n/a (no INT8 path without TensorRT)           create_calibrator (MinMax) over 4
                                                              random batches
  int8          n/a                                           quantize_static (QDQ, per channel),
                                                              then load and run it
  compare-int8  n/a                                           sessions of M and the INT8 model
  layerwise     as compare-fp16, both runs with               n/a
                --onnx-outputs mark all
  build         n/a (needs TensorRT)                          n/a (needs TensorRT)

Polygraphy's comparisons get --atol 1e9 --rtol 1e9, so that its exit status says whether the
comparison ran rather than whether FP16 is within a tight tolerance; it still fails a
comparison on NaN. As in the corpus test, the INT8 cells run only on image-like models (a float
input [N,3,H,W] or [N,H,W,3]), and a cell whose input (the FP16 or INT8 model) was not made is
n/a. ONNX Runtime's Python API has no refusals of its own: every exception it raises counts as
raw.

Set-up (once), then run:

    python3 -m venv /work/peers-venv
    /work/peers-venv/bin/pip install -r scripts/peer_conformance.requirements.txt
    /work/peers-venv/bin/python scripts/peer_conformance.py --corpus .cache/model-corpus --out peers

Writes OUT/peers.md (the table), OUT/peers.tsv (one line per model, cell and tool) and prints
the totals per tool. Polygraphy is run as its command-line tool from the same venv.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

CELLS = [
    "inspect",
    "run",
    "compare",
    "fp16",
    "compare-fp16",
    "calibrate",
    "int8",
    "compare-int8",
    "layerwise",
    "build",
]
REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "tests/model_corpus/manifest.tsv"
EXPECTED = REPO / "tests/model_corpus/expected.tsv"
# Loose tolerances: the exit status then says whether the comparison ran, as trtkit's
# compare does when no threshold is given; the differences themselves are in the logs.
LOOSE = ["--atol", "1e9", "--rtol", "1e9"]
NO_TRT = "needs TensorRT (not installable here)"


def read_manifest():
    models = []
    for line in MANIFEST.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        cols = line.split("\t")
        shapes = {}
        if cols[7] != "-":
            for flag in cols[7].split(" "):
                name, dims = flag.rsplit(":", 1)
                # The corpus test runs at batch 1 (--batch-size 1): -1 becomes 1.
                shapes[name] = [1 if d == "-1" else int(d) for d in dims.split("x")]
        models.append({"name": cols[0], "shapes": shapes})
    return models


def read_expected():
    out = {}
    for line in EXPECTED.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        model, cell, outcome = line.split("\t", 2)
        out[(model, cell)] = outcome
    return out


def image_like(path):
    """The corpus test's rule for the INT8 cells: a float input [N,3,H,W] or [N,H,W,3]."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {t.name for t in graph.initializer}
    for v in graph.input:
        if v.name in weights:
            continue
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                for d in t.shape.dim]
        if t.elem_type == 1 and len(dims) == 4 and (dims[1] == 3 or dims[3] == 3):
            return True
    return False


# ---------------------------------------------------------------- ONNX Runtime workers
# Each runs in its own process, so that a crash or a hang is one cell's outcome.

def random_feed(sess_or_model_inputs, shapes, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    types = {
        "tensor(float)": np.float32, "tensor(float16)": np.float16,
        "tensor(double)": np.float64, "tensor(int64)": np.int64,
        "tensor(int32)": np.int32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
        "tensor(bool)": np.bool_,
    }
    feed = {}
    for i in sess_or_model_inputs:
        shape = shapes.get(i.name) or [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        dtype = types[i.type]
        # Polygraphy's default data loader's range: floats in [0, 1), integers 0 or 1.
        if np.issubdtype(dtype, np.floating):
            feed[i.name] = rng.random(shape).astype(dtype)
        elif dtype == np.bool_:
            feed[i.name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            feed[i.name] = rng.integers(0, 2, shape).astype(dtype)
    return feed


def ort_session(path):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def worker(job, model, shapes, work):
    import numpy as np

    work = Path(work)
    if job == "run":
        s = ort_session(model)
        outs = s.run(None, random_feed(s.get_inputs(), shapes, 0))
        print("outputs:", [o.shape for o in outs])
    elif job.startswith("compare"):
        a = ort_session(model)
        other = {"compare": model, "compare-fp16": work / "ort-fp16.onnx",
                 "compare-int8": work / "ort-int8.onnx"}[job]
        b = ort_session(other)
        feed = random_feed(a.get_inputs(), shapes, 0)
        for name, x, y in zip([o.name for o in a.get_outputs()], a.run(None, feed),
                              b.run(None, feed)):
            x, y = np.asarray(x), np.asarray(y)
            if x.dtype.kind in "fc" or y.dtype.kind in "fc":
                d = np.abs(x.astype(np.float64) - y.astype(np.float64))
                print(f"{name}: max |a-b| {np.nanmax(d) if d.size else 0:.3g}, "
                      f"NaN in b: {int(np.isnan(y.astype(np.float64)).sum())}")
            else:
                print(f"{name}: {np.mean(x == y) * 100:.1f}% equal")
    elif job == "fp16":
        import onnx
        from onnxruntime.transformers.float16 import convert_float_to_float16

        m = convert_float_to_float16(onnx.load(str(model)), keep_io_types=True)
        onnx.save(m, str(work / "ort-fp16.onnx"))
        s = ort_session(work / "ort-fp16.onnx")
        s.run(None, random_feed(s.get_inputs(), shapes, 0))
    elif job == "calibrate":
        from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

        cal = create_calibrator(str(model), augmented_model_path=str(work / "augmented.onnx"),
                                calibrate_method=CalibrationMethod.MinMax)
        cal.collect_data(Reader(model, shapes))
        ranges = cal.compute_data()
        print(f"{len(ranges.data)} tensor ranges")
    elif job == "int8":
        from onnxruntime.quantization import QuantFormat, quantize_static

        quantize_static(str(model), str(work / "ort-int8.onnx"), Reader(model, shapes),
                        quant_format=QuantFormat.QDQ, per_channel=True)
        s = ort_session(work / "ort-int8.onnx")
        s.run(None, random_feed(s.get_inputs(), shapes, 0))
    else:
        raise SystemExit(f"unknown job {job}")


class Reader:
    """Four random batches, like the corpus test's `--calib-data synthetic:0 --num-samples 4`."""

    def __init__(self, model, shapes):
        inputs = ort_session(model).get_inputs()
        self.feeds = iter([random_feed(inputs, shapes, seed) for seed in range(4)])

    def get_next(self):
        return next(self.feeds, None)


# ---------------------------------------------------------------- running and sorting

RAW_MARKS = [
    "Traceback (most recent call last)", "[ONNXRuntimeError]", "onnxruntime.capi",
    "InferenceError]", "Fail]", "Segmentation fault", "core dumped",
]


def classify(rc, text, timed_out):
    if timed_out:
        return "timeout", "timed out"
    if rc == 0:
        return "ok", ""
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if rc < 0:
        return "raw", f"killed by signal {-rc}"
    # The message a user reads first: ONNX Runtime's or ONNX's own error, else Polygraphy's
    # first [E] line, else its last [!] line, else the last line that speaks of an error.
    kind = "raw" if any(m in text for m in RAW_MARKS) else "refused"
    picks = ([l for l in lines if "[ONNXRuntimeError]" in l or "InferenceError]" in l][:1]
             or [l for l in lines if l.startswith("[E]")][:1]
             or [l for l in lines if l.startswith("[!]")][-1:]
             or [l for l in lines if re.search(r"error|fail|exception", l, re.I)][-1:]
             or lines[-1:] or ["(no message)"])
    first = re.sub(r"^\[[EI!]\]\s*", "", picks[0])
    first = re.sub(r"^onnxruntime\.capi\.onnxruntime_pybind11_state\.", "", first)
    first = re.sub(r"\s+", " ", first)
    return kind, first[:220]


def run_cmd(args, cwd, timeout, log):
    start = time.monotonic()
    with open(log, "w") as f:
        try:
            p = subprocess.run(args, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                               timeout=timeout)
            rc, timed_out = p.returncode, False
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
    secs = time.monotonic() - start
    text = Path(log).read_text(errors="replace")
    kind, why = classify(rc, text, timed_out)
    why = why.replace(f"{cwd}/", "")
    return {"outcome": kind, "why": why, "seconds": secs}


def na(why):
    return {"outcome": "n/a", "why": why, "seconds": 0.0}


def skipped(why):
    return {"outcome": "n/a", "why": why, "seconds": 0.0}


def polygraphy_cells(m, path, work, timeout, image):
    pg = [str(Path(sys.executable).parent / "polygraphy")]
    shapes = []
    if m["shapes"]:
        shapes = ["--input-shapes"] + [f"{k}:[{','.join(map(str, v))}]"
                                       for k, v in m["shapes"].items()]
    p = str(path)
    cells = {}

    def go(cell, *steps):
        res = None
        for i, args in enumerate(steps):
            res = run_cmd(pg + args, work, timeout, work / f"pg-{cell}-{i}.log")
            if res["outcome"] != "ok":
                break
        cells[cell] = res
        return res

    go("inspect", ["inspect", "model", p])
    go("run", ["run", p, "--onnxrt"] + shapes)
    go("compare", ["run", p, "--onnxrt", "--onnxrt"] + shapes + LOOSE)
    fp16 = go("fp16", ["convert", p, "--fp-to-fp16", "-o", "pg-fp16.onnx"],
              ["run", "pg-fp16.onnx", "--onnxrt"] + shapes)
    if fp16["outcome"] == "ok":
        go("compare-fp16",
           ["run", p, "--onnxrt", "--save-inputs", "pg-in.json", "--save-outputs", "pg-a.json"]
           + shapes,
           ["run", "pg-fp16.onnx", "--onnxrt", "--load-inputs", "pg-in.json",
            "--load-outputs", "pg-a.json"] + LOOSE)
        go("layerwise",
           ["run", p, "--onnxrt", "--onnx-outputs", "mark", "all", "--save-inputs",
            "pg-lw-in.json", "--save-outputs", "pg-lw-a.json"] + shapes,
           ["run", "pg-fp16.onnx", "--onnxrt", "--onnx-outputs", "mark", "all",
            "--load-inputs", "pg-lw-in.json", "--load-outputs", "pg-lw-a.json"] + LOOSE)
    else:
        cells["compare-fp16"] = skipped("no fp16 model")
        cells["layerwise"] = skipped("no fp16 model")
    for c in ("calibrate", "int8", "compare-int8"):
        cells[c] = na("no INT8 path without TensorRT")
    cells["build"] = na(NO_TRT)
    return cells


def ort_cells(m, path, work, timeout, image):
    py = [sys.executable, str(Path(__file__).resolve()), "--worker"]
    shapes = json.dumps(m["shapes"])
    cells = {"inspect": na("no model summary in ONNX Runtime")}

    def go(cell):
        log = work / f"ort-{cell}.log"
        cells[cell] = run_cmd(py + [cell, str(path), shapes, str(work)], work, timeout, log)
        # ONNX Runtime does not object to NaN outputs; the comparison says so, the cell stays ok.
        nan = re.findall(r"^(\S+): .*NaN in b: ([1-9]\d*)", log.read_text(errors="replace"), re.M)
        if cells[cell]["outcome"] == "ok" and nan:
            cells[cell]["why"] = "NaN in the output of " + ", ".join(f"{o} ({n})" for o, n in nan)
        return cells[cell]

    go("run")
    go("compare")
    if go("fp16")["outcome"] == "ok":
        go("compare-fp16")
    else:
        cells["compare-fp16"] = skipped("no fp16 model")
    if image:
        if go("calibrate")["outcome"] == "ok":
            if go("int8")["outcome"] == "ok":
                go("compare-int8")
            else:
                cells["compare-int8"] = skipped("no int8 model")
        else:
            cells["int8"] = skipped("no calibration")
            cells["compare-int8"] = skipped("no calibration")
    else:
        for c in ("calibrate", "int8", "compare-int8"):
            cells[c] = skipped("not image-like (as the corpus test)")
    cells["layerwise"] = na("no layer-wise compare in ONNX Runtime")
    cells["build"] = na(NO_TRT)
    return cells


SYMBOL = {"ok": "✓", "refused": "refused", "raw": "**raw**", "timeout": "**timeout**",
          "n/a": "n/a"}


def trtkit_outcome(text):
    if text == "ok":
        return "ok", ""
    kind, _, why = text.partition(": ")
    return {"refused": "refused", "raw": "raw", "n/a": "n/a"}.get(kind, kind), why


def versions():
    import onnx
    import onnxruntime
    from importlib.metadata import version

    return {"polygraphy": version("polygraphy"), "onnxruntime": onnxruntime.__version__,
            "onnx": onnx.__version__, "onnxconverter-common": version("onnxconverter-common"),
            "python": sys.version.split()[0]}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        job, model, shapes, work = sys.argv[2:6]
        worker(job, model, json.loads(shapes), work)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per command (300)")
    ap.add_argument("--only", nargs="*", help="model names (default: all of the manifest)")
    ap.add_argument("--merge", action="store_true",
                    help="keep OUT/peers.tsv's rows of the models not run now")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    expected = read_expected()
    rows = []
    for m in read_manifest():
        if args.only and m["name"] not in args.only:
            continue
        path = (args.corpus / f"{m['name']}.onnx").resolve()
        if not path.exists():
            print(f"{m['name']}: not in {args.corpus}, left out", file=sys.stderr)
            continue
        work = (args.out / "work" / m["name"]).resolve()
        work.mkdir(parents=True, exist_ok=True)
        image = image_like(path)
        t0 = time.monotonic()
        pg = polygraphy_cells(m, path, work, args.timeout, image)
        ort = ort_cells(m, path, work, args.timeout, image)
        for cell in CELLS:
            tk = trtkit_outcome(expected.get((m["name"], cell), "n/a: not in expected.tsv"))
            rows.append((m["name"], cell, "trtkit", tk[0], tk[1], 0.0))
            for tool, res in (("polygraphy", pg[cell]), ("onnxruntime", ort[cell])):
                rows.append((m["name"], cell, tool, res["outcome"], res["why"], res["seconds"]))
        print(f"{m['name']}: {time.monotonic() - t0:.0f} s", file=sys.stderr)

    if args.merge and (args.out / "peers.tsv").exists():
        ran = {r[0] for r in rows}
        kept = []
        for line in (args.out / "peers.tsv").read_text().splitlines()[1:]:
            c = line.split("\t")
            if c[0] not in ran:
                kept.append((c[0], c[1], c[2], c[3], c[4], float(c[5])))
        order = [m["name"] for m in read_manifest()]
        rows = sorted(kept + rows, key=lambda r: (order.index(r[0]), CELLS.index(r[1])))

    with open(args.out / "peers.tsv", "w") as f:
        f.write("#model\tcell\ttool\toutcome\twhy\tseconds\n")
        for r in rows:
            why = r[4].replace("\t", " ").replace("\n", " ")
            f.write(f"{r[0]}\t{r[1]}\t{r[2]}\t{r[3]}\t{why}\t{r[5]:.1f}\n")

    by = {}
    for r in rows:
        by[(r[0], r[1], r[2])] = r
    models = list(dict.fromkeys(r[0] for r in rows))
    md = ["| model | " + " | ".join(CELLS) + " |", "|---" * (len(CELLS) + 1) + "|"]
    for name in models:
        cells = []
        for cell in CELLS:
            cells.append(" / ".join(SYMBOL[by[(name, cell, t)][3]] + ("*" if by[(name, cell, t)][3] == "ok" and by[(name, cell, t)][4] else "")
                                    for t in ("trtkit", "polygraphy", "onnxruntime")))
        md.append(f"| {name} | " + " | ".join(cells) + " |")
    totals = {}
    for r in rows:
        totals.setdefault(r[2], {}).setdefault(r[3], 0)
        totals[r[2]][r[3]] += 1
    lines = []
    for tool in ("trtkit", "polygraphy", "onnxruntime"):
        t = totals.get(tool, {})
        lines.append(f"{tool}: " + ", ".join(f"{t.get(k, 0)} {k}" for k in
                                             ("ok", "refused", "raw", "timeout", "n/a")))
    notes = ["", "Why, for each peer cell that is not ✓ or a plain n/a (✓*: it ran, with a note):", ""]
    for r in rows:
        if r[2] != "trtkit" and (r[3] not in ("ok", "n/a") or (r[3] == "ok" and r[4])):
            notes.append(f"- {r[0]} {r[1]}, {r[2]}: {r[3]}: `{r[4]}`")
    v = versions()
    head = ["Each cell: trtkit / Polygraphy / ONNX Runtime. " +
            ", ".join(f"{k} {x}" for k, x in v.items()) + ".", ""]
    (args.out / "peers.md").write_text("\n".join(head + md + [""] + lines + notes) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
