#!/usr/bin/env python3
"""Engine builds side by side: `trtkit build` against a bare TensorRT-RTX Python build.

Same machine, same run, same library (the folder given by --tensorrt-dir is used by both sides).

(a) FP32 and FP16 builds of torchvision resnet50 and mobilenet_v3_large (random seeded weights,
    exported here with torch.onnx.export, opset 17, input "input" with a dynamic axis "batch",
    output "output"; or the ONNX files given with --models):

    - trtkit: `trtkit build MODEL [--fp16] --input-shape -1 3 224 224 --min-batch 1
      --opt-batch 32 --max-batch 64 --rebuild -o ENGINE --json`, timed from process start to
      exit with the engine on disk (its own --json timing is kept too);
    - bare: a fresh Python process imports the TensorRT-RTX bindings, then Builder, network,
      trt.OnnxParser.parse_from_file, one optimization profile with the same min/opt/max shapes,
      builder.build_serialized_network, bytes written to a file. "bare build" is that span
      (Builder creation to bytes on disk); "bare process" is the child's whole wall time,
      interpreter start and import included.

    For FP16 the bare side builds the FP16 ONNX that trtkit's rewrite writes
    (`trtkit quantize MODEL --fp16 -o X.onnx --json`, done once per model), so both sides build
    the same network; for FP32 it builds the original ONNX. trtkit's overhead is
    (trtkit wall - bare build) / bare build, on the medians. Each configuration runs --rounds
    times, alternating the two sides (ABBA order, so drift hits both); median and min reported.

(b) with --int8: `trtkit build RESNET50 --int8 --calib-data DIR --batch-size 32 --recalibrate
    --rebuild` end to end (calibration + Q/DQ rewrite + build) on N random-normal images
    (.npy, [3,224,224] float32 each, seeded), beside ONNX Runtime's
    onnxruntime.quantization.quantize_static (QDQ, per_channel=True, CalibrationMethod.Entropy,
    symmetric int8 and float biases as TensorRT needs, a CalibrationDataReader over the same
    arrays at batch 32),
    run in a child process killed after --ort-timeout seconds. When ORT finishes, its Q/DQ model
    is also built by the bare TensorRT-RTX path, so "ORT + bare build" is the Python pipeline's
    end to end figure next to trtkit's.

Finding TensorRT-RTX: trtkit gets TRTKIT_TENSORRT_DIR=<--tensorrt-dir>. The bindings
(`tensorrt_rtx`, or `tensorrt_rtx_bindings` as the tensorrt-rtx-cu13-bindings wheel names its
package) load libtensorrt_rtx.so.1 and libtensorrt_onnxparser_rtx.so.1 by soname (RPATH
$ORIGIN, then LD_LIBRARY_PATH); their __init__ first tries `import tensorrt_rtx_libs` (the libs
wheel). With --tensorrt-dir, the bare child blocks that import, loads both libraries from the
folder by absolute path with ctypes before importing the bindings (so the soname is already
satisfied) and also gets the folder on LD_LIBRARY_PATH: the libraries may sit in a plain folder.
Without --tensorrt-dir, the tensorrt_rtx_libs package is used (and passed to trtkit).

Writes a table on stdout and, with --json FILE, every raw number, the commands, and the machine.
Needs: Python 3, the TensorRT-RTX bindings; onnx (model input shapes); torch + torchvision
(export only); numpy + onnxruntime (--int8 only).

    python3 scripts/bench_build.py --trtkit target/release/trtkit --tensorrt-dir /tmp/trtrtx \\
        --work /tmp/bench-build --rounds 3 --int8 --json results/bench_build.json

    # bare side only, on given models (e.g. here, without a GPU or torch):
    python3 scripts/bench_build.py --skip-trtkit --models .cache/onnx-test-data/light/light_resnet50.onnx
"""
import argparse
import ctypes
import glob
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time

LIBS = ("libtensorrt_rtx.so.1", "libtensorrt_onnxparser_rtx.so.1")
SELF = os.path.abspath(__file__)

# --------------------------------------------------------------------------------------------
# Child modes: the bare build, the ONNX export, ORT's quantize_static. Each prints one JSON line.
# --------------------------------------------------------------------------------------------


def import_tensorrt_rtx(trt_dir):
    """Imports the TensorRT-RTX bindings, with the libraries taken from `trt_dir` when given.

    Returns (module, library paths as mapped in this process)."""
    if trt_dir:
        missing = [lib for lib in LIBS if not os.path.isfile(os.path.join(trt_dir, lib))]
        if missing:
            raise SystemExit(f"--tensorrt-dir {trt_dir}: {', '.join(missing)} not found there")
        # The bindings' __init__ would load the libs wheel's copies if it is installed; block it
        # so the process holds exactly one TensorRT-RTX, the one trtkit is told to use.
        sys.modules.setdefault("tensorrt_rtx_libs", None)
        for lib in LIBS:  # order matters: the parser needs the core library
            ctypes.CDLL(os.path.join(trt_dir, lib), mode=ctypes.RTLD_GLOBAL)
    try:
        import tensorrt_rtx as trt  # a `tensorrt_rtx` package, if one is installed
    except ImportError:
        import tensorrt_rtx_bindings as trt  # what tensorrt-rtx-cu13-bindings installs
    mapped = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.basename(parts[5]) in LIBS:
                mapped.add(parts[5])
    return trt, sorted(mapped)


def profile_shapes(dims, input_shape, min_b, opt_b, max_b, name):
    """min/opt/max for one network input: fixed dims kept, a dynamic dim 0 is the batch, other
    dynamic dims come from --input-shape. Returns None for a fully fixed input."""
    dims = list(dims)
    if all(d >= 0 for d in dims):
        return None
    shapes = []
    for b in (min_b, opt_b, max_b):
        s = []
        for i, d in enumerate(dims):
            if d >= 0:
                s.append(d)
            elif i == 0:
                s.append(b)
            elif input_shape and len(input_shape) == len(dims) and input_shape[i] > 0:
                s.append(input_shape[i])
            else:
                raise SystemExit(f"input {name} {dims}: dim {i} is dynamic and --input-shape gives no size for it")
        shapes.append(tuple(s))
    return shapes


def bare_build(a):
    t0 = time.perf_counter()
    trt, mapped = import_tensorrt_rtx(a.tensorrt_dir)
    t_import = time.perf_counter() - t0
    logger = trt.Logger(trt.Logger.WARNING)
    t1 = time.perf_counter()
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # TensorRT-RTX networks are strongly typed
    parser = trt.OnnxParser(network, logger)
    ok = parser.parse_from_file(os.path.abspath(a.onnx))
    if not ok:
        errs = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise SystemExit(f"OnnxParser failed on {a.onnx}: {errs}")
    t2 = time.perf_counter()
    config = builder.create_builder_config()
    inputs, profile = [], None
    for i in range(network.num_inputs):
        x = network.get_input(i)
        shapes = profile_shapes(x.shape, a.input_shape, a.min_batch, a.opt_batch, a.max_batch, x.name)
        inputs.append({"name": x.name, "dims": list(x.shape), "dtype": str(x.dtype),
                       "profile": None if shapes is None else [list(s) for s in shapes]})
        if shapes is not None:
            profile = profile or builder.create_optimization_profile()
            profile.set_shape(x.name, *shapes)
    if profile is not None:
        config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise SystemExit(f"build_serialized_network returned nothing for {a.onnx}")
    t3 = time.perf_counter()
    tmp = a.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(plan)
    os.replace(tmp, a.out)
    t4 = time.perf_counter()
    magic = bytes(memoryview(plan)[:4]).decode("ascii", "replace")
    print(json.dumps({
        "import_s": t_import, "parse_s": t2 - t1, "build_s": t3 - t2, "write_s": t4 - t3,
        "total_s": t4 - t1, "engine": a.out, "engine_bytes": os.path.getsize(a.out), "magic": magic,
        "inputs": inputs, "outputs": [network.get_output(i).name for i in range(network.num_outputs)],
        "layers": network.num_layers,
        "strongly_typed": bool(network.get_flag(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)),
        "compute_capabilities": config.num_compute_capabilities,
        "tensorrt_version": trt.__version__, "module": trt.__name__, "libraries": mapped,
    }))


def export_models(a):
    import inspect

    import torch
    import torchvision

    os.makedirs(a.out, exist_ok=True)
    done = {}
    kw = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False
    for name in a.arch:
        path = os.path.join(a.out, f"{name}.onnx")
        t0 = time.perf_counter()
        torch.manual_seed(a.seed)
        model = torchvision.models.get_model(name, weights=None).eval()
        dummy = torch.randn(1, 3, 224, 224)
        tmp = path + ".tmp.onnx"
        common = dict(input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=a.opset)
        exporter = "torchscript" if kw else "default"
        with torch.no_grad():
            try:
                torch.onnx.export(model, dummy, tmp, **common, **kw)
            except Exception as e:  # noqa: BLE001 - a torch without the TorchScript exporter
                if not kw:
                    raise
                print(f"dynamo=False export failed ({e}); retrying with dynamo=True", file=sys.stderr)
                sig = inspect.signature(torch.onnx.export).parameters
                extra = {"external_data": False} if "external_data" in sig else {}
                torch.onnx.export(model, dummy, tmp, **common, dynamo=True, **extra)
                exporter = "dynamo"
        os.replace(tmp, path)
        done[name] = {"path": path, "bytes": os.path.getsize(path), "export_s": time.perf_counter() - t0,
                      "exporter": exporter}
    print(json.dumps({"torch": torch.__version__, "torchvision": torchvision.__version__,
                      "dynamo_kw": kw.get("dynamo"), "models": done}))


def ort_quantize(a):
    t0 = time.perf_counter()
    import numpy as np
    import onnxruntime
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat,
                                          QuantType, quantize_static)

    files = sorted(glob.glob(os.path.join(a.calib, "*.npy")))
    arrays = [np.load(f) for f in files]
    batches = [np.stack(arrays[i:i + a.batch]) for i in range(0, len(arrays), a.batch)]
    t_load = time.perf_counter() - t0

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(batches)

        def get_next(self):
            b = next(self.it, None)
            return None if b is None else {a.input_name: b}

    t1 = time.perf_counter()
    quantize_static(a.onnx, a.out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.Entropy,
                    extra_options={"ActivationSymmetric": True, "WeightSymmetric": True,
                                   # TensorRT takes no int32 DequantizeLinear (a quantized bias)
                                   "QuantizeBias": False})
    t2 = time.perf_counter()
    print(json.dumps({"onnxruntime": onnxruntime.__version__, "images": len(arrays), "batches": len(batches),
                      "load_s": t_load, "quantize_static_s": t2 - t1, "total_s": t2 - t0,
                      "out_bytes": os.path.getsize(a.out)}))


def child_main(argv):
    mode = argv[0]
    ap = argparse.ArgumentParser(prog=f"bench_build.py {mode}")
    if mode == "_bare-build":
        ap.add_argument("--onnx", required=True)
        ap.add_argument("--out", required=True)
        ap.add_argument("--tensorrt-dir")
        ap.add_argument("--input-shape", type=int, nargs="+")
        ap.add_argument("--min-batch", type=int, default=1)
        ap.add_argument("--opt-batch", type=int, default=32)
        ap.add_argument("--max-batch", type=int, default=64)
        bare_build(ap.parse_args(argv[1:]))
    elif mode == "_export":
        ap.add_argument("--out", required=True)
        ap.add_argument("--arch", nargs="+", required=True)
        ap.add_argument("--seed", type=int, default=0)
        ap.add_argument("--opset", type=int, default=17)
        export_models(ap.parse_args(argv[1:]))
    elif mode == "_ort-quantize":
        ap.add_argument("--onnx", required=True)
        ap.add_argument("--out", required=True)
        ap.add_argument("--calib", required=True)
        ap.add_argument("--batch", type=int, default=32)
        ap.add_argument("--input-name", default="input")
        ort_quantize(ap.parse_args(argv[1:]))
    else:
        raise SystemExit(f"unknown mode {mode}")
    return 0


# --------------------------------------------------------------------------------------------
# The driver.
# --------------------------------------------------------------------------------------------

CURRENT = {"proc": None}


class Failed(Exception):
    pass


def run(cmd, env=None, timeout=None):
    """Runs cmd; returns (stdout, wall seconds from spawn to exit). Raises Failed with the
    stderr tail on a non-zero exit, and on timeout (the child is killed)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    CURRENT["proc"] = p
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise Failed(f"timed out after {timeout:.0f} s: {' '.join(cmd)}")
    finally:
        CURRENT["proc"] = None
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise Failed(f"exit {p.returncode}: {' '.join(cmd)}\n{(err or '').strip()[-3000:]}")
    return out, wall


def last_json(text):
    """The JSON object a command printed (the whole stdout, or its last line that parses)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    start = text.find("{")
    if start >= 0:
        return json.loads(text[start:])
    raise ValueError(f"no JSON in output: {text[-500:]!r}")


def model_input_dims(path):
    """[(name, dims)] of the graph inputs (-1 for symbolic dims), or None without `onnx`."""
    try:
        import onnx
    except ImportError:
        return None
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in i.type.tensor_type.shape.dim]
        out.append((i.name, dims))
    return out


def machine_info():
    info = {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0],
            "hostname": platform.node()}
    try:
        info["cpu_affinity"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_total_kib"] = int(f.readline().split()[1])
    except OSError:
        pass
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        if p.returncode == 0:
            info["gpus"] = [line.strip() for line in p.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def stats(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        return child_main(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trtkit", default="trtkit", help="the trtkit binary (default: trtkit on PATH)")
    ap.add_argument("--skip-trtkit", action="store_true", help="bare side only (FP16 then needs <work>/<stem>-fp16.onnx)")
    ap.add_argument("--tensorrt-dir", help="folder with libtensorrt_rtx.so.1 and libtensorrt_onnxparser_rtx.so.1 "
                    "(default: $TRTKIT_TENSORRT_DIR, else the tensorrt_rtx_libs package)")
    ap.add_argument("--work", default="/tmp/bench-build", help="models, FP16 ONNX, engines, calibration data")
    ap.add_argument("--models", nargs="+", help="ONNX files to use instead of exporting --arch")
    ap.add_argument("--arch", nargs="+", default=["resnet50", "mobilenet_v3_large"], help="torchvision models to export")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--precisions", nargs="+", default=["fp32", "fp16"], choices=["fp32", "fp16"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--input-shape", type=int, nargs="+", default=[-1, 3, 224, 224])
    ap.add_argument("--min-batch", type=int, default=1)
    ap.add_argument("--opt-batch", type=int, default=32)
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--int8", action="store_true", help="also run part (b): trtkit build --int8 vs ORT quantize_static")
    ap.add_argument("--int8-model", help="model for (b) (default: the resnet50 export, else the first model)")
    ap.add_argument("--int8-rounds", type=int, help="rounds of trtkit build --int8 (default: --rounds)")
    ap.add_argument("--calib-images", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--ort-timeout", type=float, default=300.0, help="seconds; ORT's quantize_static is skipped past it")
    ap.add_argument("--trtkit-timeout", type=float, default=600.0, help="seconds per trtkit command")
    ap.add_argument("--budget", type=float, help="seconds; steps that would start later are skipped (results kept)")
    ap.add_argument("--json", help="write every raw number here")
    ap.add_argument("--prepare-only", action="store_true",
                    help="only export the models (and, with --int8, write the calibration data) into --work")
    a = ap.parse_args()

    start = time.perf_counter()
    elapsed = lambda: time.perf_counter() - start  # noqa: E731
    left = lambda: None if a.budget is None else a.budget - elapsed()  # noqa: E731

    trt_dir = a.tensorrt_dir or os.environ.get("TRTKIT_TENSORRT_DIR")
    if not trt_dir:
        import importlib.util

        spec = importlib.util.find_spec("tensorrt_rtx_libs")
        if spec is not None:
            trt_dir = os.path.dirname(spec.origin)
    if trt_dir:
        trt_dir = os.path.abspath(trt_dir)
    env = dict(os.environ)
    if trt_dir:
        env["TRTKIT_TENSORRT_DIR"] = trt_dir
        env["LD_LIBRARY_PATH"] = trt_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    os.makedirs(a.work, exist_ok=True)
    engines = os.path.join(a.work, "engines")
    os.makedirs(engines, exist_ok=True)

    R = {"machine": machine_info(), "tensorrt_dir": trt_dir, "args": vars(a), "notes": [], "configs": [],
         "models": {}}

    def note(msg):
        R["notes"].append(msg)
        print(f"note: {msg}", flush=True)

    def dump():
        R["elapsed_s"] = elapsed()
        if a.json:
            d = os.path.dirname(os.path.abspath(a.json))
            os.makedirs(d, exist_ok=True)
            with open(a.json + ".tmp", "w") as f:
                json.dump(R, f, indent=2)
            os.replace(a.json + ".tmp", a.json)

    def on_term(signum, _frame):
        p = CURRENT["proc"]
        if p is not None and p.poll() is None:
            p.kill()
        R["interrupted"] = f"signal {signum} after {elapsed():.1f} s"
        for c in R["configs"]:
            summarize(c)
        dump()
        print_tables(R)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)

    if not a.skip_trtkit and not a.prepare_only:
        try:
            out, _ = run([a.trtkit, "--version"], env=env, timeout=60)
            R["trtkit_version"] = out.strip()
        except (Failed, OSError) as e:
            raise SystemExit(f"--trtkit {a.trtkit} does not run: {e} (or pass --skip-trtkit)")

    # Models.
    models = []
    if a.models:
        models = [os.path.abspath(m) for m in a.models]
    else:
        mdir = os.path.join(a.work, "models")
        need = [n for n in a.arch if not os.path.isfile(os.path.join(mdir, f"{n}.onnx"))]
        if need:
            out, wall = run([sys.executable, SELF, "_export", "--out", mdir, "--arch", *need, "--seed", str(a.seed)])
            R["export"] = {**last_json(out), "wall_s": wall}
            print(f"exported {', '.join(need)} in {wall:.1f} s", flush=True)
        models = [os.path.abspath(os.path.join(mdir, f"{n}.onnx")) for n in a.arch]
    dump()
    if a.prepare_only:
        if a.int8:
            t0 = time.perf_counter()
            print(f"calibration data in {ensure_calib(a)} ({time.perf_counter() - t0:.1f} s)")
        for m in models:
            print(f"{m}: {os.path.getsize(m) / 2**20:.1f} MiB, inputs {model_input_dims(m)}")
        return 0

    def bare(onnx_path, engine, label):
        cmd = [sys.executable, SELF, "_bare-build", "--onnx", onnx_path, "--out", engine,
               "--input-shape", *map(str, a.input_shape), "--min-batch", str(a.min_batch),
               "--opt-batch", str(a.opt_batch), "--max-batch", str(a.max_batch)]
        if trt_dir:
            cmd += ["--tensorrt-dir", trt_dir]
        try:
            out, wall = run(cmd, env=env, timeout=a.trtkit_timeout)
        except Failed as e:
            note(f"bare build {label} failed: {e}")
            return None
        rep = last_json(out)
        rep["process_wall_s"] = wall
        return rep

    def trtkit_build(onnx_path, engine, flags, dynamic, label):
        shape = (["--input-shape", *map(str, a.input_shape), "--min-batch", str(a.min_batch),
                  "--opt-batch", str(a.opt_batch), "--max-batch", str(a.max_batch)] if dynamic else [])
        cmd = [a.trtkit, "build", onnx_path, *shape, *flags, "--rebuild", "-o", engine, "--json"]
        if os.path.exists(engine):
            os.remove(engine)
        try:
            out, wall = run(cmd, env=env, timeout=a.trtkit_timeout)
        except Failed as e:
            note(f"trtkit {label} failed: {e}")
            return None, cmd
        try:
            rep = last_json(out)
        except ValueError as e:
            note(f"trtkit {label}: {e}")
            rep = {}
        rep["wall_s"] = wall
        rep["engine_on_disk_bytes"] = os.path.getsize(engine) if os.path.exists(engine) else None
        if rep.get("reused"):
            note(f"trtkit {label}: reported reused=true despite --rebuild")
        return rep, cmd

    # (a) FP32 / FP16.
    for model in models:
        stem = os.path.splitext(os.path.basename(model))[0]
        dims = model_input_dims(model)
        dynamic = True if dims is None else any(x < 0 for _, d in dims for x in d)
        R["models"][stem] = {"path": model, "bytes": os.path.getsize(model), "inputs": dims}
        fp16_onnx = os.path.join(a.work, f"{stem}-fp16.onnx")
        for prec in a.precisions:
            label = f"{stem} {prec}"
            if left() is not None and left() < 0:
                note(f"{label}: skipped, past the --budget")
                continue
            cfg = {"model": stem, "precision": prec, "dynamic": dynamic, "trtkit": [], "bare": []}
            if prec == "fp32":
                bare_onnx, flags = model, []
            else:
                bare_onnx, flags = fp16_onnx, ["--fp16"]
                if not a.skip_trtkit:
                    try:
                        out, wall = run([a.trtkit, "quantize", model, "--fp16", "-o", fp16_onnx, "--no-check", "--json"],
                                        env=env, timeout=a.trtkit_timeout)
                        cfg["quantize_fp16"] = {**last_json(out), "wall_s": wall}
                    except (Failed, ValueError) as e:
                        note(f"{label}: trtkit quantize --fp16 failed, FP16 skipped: {e}")
                        continue
                elif not os.path.isfile(fp16_onnx):
                    note(f"{label}: skipped (--skip-trtkit and no {fp16_onnx})")
                    continue
            cfg["bare_onnx"] = bare_onnx
            R["configs"].append(cfg)
            t_engine = os.path.join(engines, f"{stem}-{prec}-trtkit.engine")
            b_engine = os.path.join(engines, f"{stem}-{prec}-bare.engine")
            for r in range(a.rounds):
                order = ["trtkit", "bare"] if r % 2 == 0 else ["bare", "trtkit"]
                for side in order:
                    if side == "trtkit" and not a.skip_trtkit:
                        rep, cmd = trtkit_build(model, t_engine, flags, dynamic, label)
                        cfg["trtkit_cmd"] = cmd
                        cfg["trtkit"].append(rep)
                    elif side == "bare":
                        cfg["bare"].append(bare(bare_onnx, b_engine, label))
                dump()
            summarize(cfg)
            dump()
            print(f"{label}: trtkit wall {fmt(get(cfg, 'trtkit_wall', 'median'))} s, "
                  f"bare build {fmt(get(cfg, 'bare_build', 'median'))} s, "
                  f"bare process {fmt(get(cfg, 'bare_process', 'median'))} s, "
                  f"overhead {fmt(cfg.get('overhead_percent'), 1)} %", flush=True)

    # (b) INT8.
    if a.int8:
        int8_part(a, R, models, env, trt_dir, engines, trtkit_build, bare, note, dump, left)

    R["total_s"] = elapsed()
    dump()
    print_tables(R)
    return 0


def get(cfg, key, stat):
    s = cfg.get(key)
    return None if not s else s.get(stat)


def summarize(cfg):
    tk = [r for r in cfg["trtkit"] if r]
    bb = [r for r in cfg["bare"] if r]
    cfg["trtkit_wall"] = stats([r.get("wall_s") for r in tk])
    cfg["trtkit_timing"] = {k: stats([(r.get("timing") or {}).get(k) for r in tk])
                            for k in ("total_s", "load_s", "rewrite_s", "calibrate_s", "parse_s", "build_s", "write_s")}
    cfg["bare_build"] = stats([r["total_s"] for r in bb])
    cfg["bare_process"] = stats([r["process_wall_s"] for r in bb])
    cfg["bare_parse"] = stats([r["parse_s"] for r in bb])
    cfg["bare_build_only"] = stats([r["build_s"] for r in bb])
    cfg["bare_import"] = stats([r["import_s"] for r in bb])
    tw, bt, bp = get(cfg, "trtkit_wall", "median"), get(cfg, "bare_build", "median"), get(cfg, "bare_process", "median")
    if tw is not None and bt:
        cfg["overhead_percent"] = 100.0 * (tw - bt) / bt
        cfg["overhead_min_percent"] = 100.0 * (cfg["trtkit_wall"]["min"] - cfg["bare_build"]["min"]) / cfg["bare_build"]["min"]
    if tw is not None and bp:
        cfg["wall_vs_bare_process_percent"] = 100.0 * (tw - bp) / bp
    cfg["engine_bytes"] = {"trtkit": tk[-1].get("engine_bytes", tk[-1].get("engine_on_disk_bytes")) if tk else None,
                           "bare": bb[-1]["engine_bytes"] if bb else None}


def ensure_calib(a):
    """<work>/calib-N-seedS/: N random-normal float32 [3,224,224] .npy files (kept between runs)."""
    import numpy as np

    calib = os.path.join(a.work, f"calib-{a.calib_images}-seed{a.seed}")
    marker = calib + ".done"  # beside, not inside: the folder holds only the arrays
    if not os.path.isfile(marker):
        os.makedirs(calib, exist_ok=True)
        rng = np.random.default_rng(a.seed)
        for i in range(a.calib_images):
            np.save(os.path.join(calib, f"{i:05d}.npy"), rng.standard_normal((3, 224, 224), dtype=np.float32))
        open(marker, "w").close()
    return calib


def int8_part(a, R, models, env, trt_dir, engines, trtkit_build, bare, note, dump, left):
    if a.int8_model:
        model = os.path.abspath(a.int8_model)
    else:
        model = next((m for m in models if "resnet50" in os.path.basename(m)), models[0])
    stem = os.path.splitext(os.path.basename(model))[0]
    t0 = time.perf_counter()
    calib = ensure_calib(a)
    I = R["int8"] = {"model": stem, "path": model, "calib_dir": calib, "images": a.calib_images,
                     "batch_size": a.batch_size, "data_write_s": time.perf_counter() - t0, "trtkit": []}
    dims = model_input_dims(model)
    dynamic = True if dims is None else any(x < 0 for _, d in dims for x in d)
    input_name = dims[0][0] if dims else "input"

    if not a.skip_trtkit:
        flags = ["--int8", "--calib-data", calib, "--batch-size", str(a.batch_size), "--recalibrate"]
        for r in range(a.int8_rounds or a.rounds):
            if left() is not None and left() < 0:
                note(f"int8 trtkit round {r + 1}: skipped, past the --budget")
                break
            rep, cmd = trtkit_build(model, os.path.join(engines, f"{stem}-int8-trtkit.engine"), flags, dynamic,
                                    f"{stem} int8")
            I["trtkit_cmd"] = cmd
            I["trtkit"].append(rep)
            dump()
            if rep:
                print(f"{stem} int8 trtkit round {r + 1}: wall {rep['wall_s']:.1f} s, "
                      f"timing {json.dumps(rep.get('timing'))}", flush=True)
        tk = [r for r in I["trtkit"] if r]
        I["trtkit_wall"] = stats([r["wall_s"] for r in tk])
        I["trtkit_timing"] = {k: stats([(r.get("timing") or {}).get(k) for r in tk])
                              for k in ("total_s", "load_s", "calibrate_s", "rewrite_s", "parse_s", "build_s", "write_s")}

    limit = a.ort_timeout
    if left() is not None:
        limit = min(limit, left())
    if limit <= 10:
        I["ort"] = {"skipped": f"{limit:.0f} s left (ort-timeout {a.ort_timeout:.0f} s, budget)"}
        note(f"ORT quantize_static skipped: {I['ort']['skipped']}")
    else:
        out_path = os.path.join(a.work, f"{stem}-ort-entropy-qdq.onnx")
        cmd = [sys.executable, SELF, "_ort-quantize", "--onnx", model, "--out", out_path, "--calib", calib,
               "--batch", str(a.batch_size), "--input-name", input_name]
        try:
            out, wall = run(cmd, env=env, timeout=limit)
            I["ort"] = {**last_json(out), "wall_s": wall, "model": out_path}
            print(f"ORT quantize_static (Entropy, QDQ, per channel): {I['ort']['quantize_static_s']:.1f} s "
                  f"(process {wall:.1f} s)", flush=True)
            rep = bare(out_path, os.path.join(engines, f"{stem}-int8-ort-bare.engine"), f"{stem} ort-int8")
            I["ort_bare_build"] = rep
            if rep:
                I["ort_plus_bare_s"] = wall + rep["process_wall_s"]
        except Failed as e:
            msg = str(e)
            I["ort"] = {"skipped" if "timed out" in msg else "failed": msg[:2000], "timeout_s": limit}
            note(f"ORT quantize_static: {msg[:300]}")
    dump()


def print_tables(R):
    rows = [("model", "prec", "trtkit wall", "trtkit build_s", "bare build", "bare build_s",
             "bare process", "overhead", "engine MiB t/b")]
    for c in R["configs"]:
        eb = c.get("engine_bytes") or {}
        mib = lambda b: "-" if not b else f"{b / 2**20:.1f}"  # noqa: E731
        tbs = (c.get("trtkit_timing") or {}).get("build_s")
        rows.append((
            c["model"], c["precision"],
            f"{fmt(get(c, 'trtkit_wall', 'median'))} / {fmt(get(c, 'trtkit_wall', 'min'))}",
            fmt(tbs["median"]) if tbs else "-",
            f"{fmt(get(c, 'bare_build', 'median'))} / {fmt(get(c, 'bare_build', 'min'))}",
            fmt(get(c, "bare_build_only", "median")),
            fmt(get(c, "bare_process", "median")),
            "-" if c.get("overhead_percent") is None else f"{c['overhead_percent']:+.0f} %",
            f"{mib(eb.get('trtkit'))} / {mib(eb.get('bare'))}",
        ))
    m = R["machine"]
    print()
    print(f"machine: {m.get('cpu_model', '?')}, {m.get('cpu_count')} CPUs; TensorRT-RTX from {R.get('tensorrt_dir')}")
    print("seconds, median / min over rounds; 'bare build' = Builder to bytes on disk in a fresh Python process "
          "(import excluded), 'bare process' = that child's whole wall; overhead = (trtkit wall - bare build) / bare build")
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for j, r in enumerate(rows):
        print("  ".join(str(x).ljust(w) if i < 2 else str(x).rjust(w) for i, (x, w) in enumerate(zip(r, widths))))
        if j == 0:
            print("  ".join("-" * w for w in widths))
    I = R.get("int8")
    if I:
        print()
        print(f"INT8 end to end on {I['model']}, {I['images']} images at batch {I['batch_size']}:")
        tw = I.get("trtkit_wall")
        if tw:
            t = I.get("trtkit_timing") or {}
            parts = ", ".join(f"{k[:-2]} {fmt(v['median'])}" for k, v in t.items() if v and k != "total_s")
            print(f"  trtkit build --int8 (wall)   {fmt(tw['median'])} s median, {fmt(tw['min'])} s min ({parts})")
        o = I.get("ort") or {}
        if "quantize_static_s" in o:
            print(f"  ORT quantize_static Entropy  {o['quantize_static_s']:.2f} s (process {o['wall_s']:.2f} s)")
            b = I.get("ort_bare_build")
            if b:
                print(f"  + bare build of its Q/DQ     {b['total_s']:.2f} s (process {b['process_wall_s']:.2f} s); "
                      f"ORT + bare build {I['ort_plus_bare_s']:.2f} s")
        elif o:
            print(f"  ORT quantize_static: {next(iter(o.values()))}"[:400])
    if R["notes"]:
        print()
        for n in R["notes"]:
            print(f"note: {n}"[:600])
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
