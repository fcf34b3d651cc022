#!/usr/bin/env python3
"""PyTorch eager inference throughput on the same card, used as an anchor.

Builds torchvision classification models (resnet50 and mobilenet_v3_large by
default; `distilbert` is the DistilBERT-class classifier of export_token_model.py, fed
--seq tokens) with random weights (weights=None, seeded), puts them in eval mode on
the GPU with cudnn.benchmark enabled and, unless disabled, channels_last memory
format for both model and input. For each model, precision (fp32 / fp16 via
.half()) and batch size it runs, under torch.inference_mode(), `--warmup`
untimed forward passes and then `--iterations` timed ones bracketed by CUDA
events (start event, loop, end event, synchronize).

One JSON line per (model, precision, batch) goes to stdout, a readable line
to stderr.

Run (on a machine with an NVIDIA GPU, PyTorch and torchvision):
    python3 scripts/torch_eager_bench.py resnet50 mobilenet_v3_large \
        --precisions fp32,fp16 --batch-sizes 256 --iterations 50
"""
import argparse
import json
import os
import sys

DEFAULT_MODELS = ["resnet50", "mobilenet_v3_large"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="*", default=DEFAULT_MODELS,
                   help="torchvision model names (default: resnet50 mobilenet_v3_large)")
    p.add_argument("--precisions", default="fp32,fp16",
                   help="comma list of fp32/fp16 (default: fp32,fp16)")
    p.add_argument("--batch-sizes", default="256",
                   help="comma-separated batch sizes (default: 256)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up passes (default: 10)")
    p.add_argument("--iterations", type=int, default=50,
                   help="timed forward passes (default: 50)")
    p.add_argument("--no-channels-last", action="store_true",
                   help="keep NCHW contiguous layout instead of channels_last")
    p.add_argument("--image-size", type=int, default=224,
                   help="input height/width (default: 224)")
    p.add_argument("--seq", type=int, default=128,
                   help="tokens per sample of the distilbert model (default: 128)")
    p.add_argument("--seed", type=int, default=0, help="RNG seed (default: 0)")
    args = p.parse_args(argv)
    args.precisions = [x.strip() for x in args.precisions.split(",") if x.strip()]
    for prec in args.precisions:
        if prec not in ("fp32", "fp16"):
            p.error(f"unknown precision {prec!r} (expected fp32 or fp16)")
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    return args


def token_model(torch, args, batch):
    """The DistilBERT-class classifier of export_token_model.py and its inputs at --seq tokens."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from export_token_model import Classifier

    model = Classifier().eval().cuda()
    ids = torch.randint(0, 30522, (batch, args.seq), device="cuda")
    mask = torch.ones(batch, args.seq, dtype=torch.int64, device="cuda")
    return model, (ids, mask)


def bench_one(torch, torchvision, args, name, precision, batch):
    torch.manual_seed(args.seed)
    channels_last = False
    if name == "distilbert":
        # Its float32 attention mask meets float16 scores: FP16 through autocast, as PyTorch
        # users run a transformer, rather than .half().
        model, inputs = token_model(torch, args, batch)
        if precision == "fp16":
            float_model = model
            def model(*a):
                with torch.autocast("cuda", dtype=torch.float16):
                    return float_model(*a)
    else:
        ctor = getattr(torchvision.models, name, None)
        if ctor is None:
            raise SystemExit(f"torchvision.models has no model named {name!r}")
        model = ctor(weights=None).eval().cuda()
        x = torch.rand(batch, 3, args.image_size, args.image_size, device="cuda")
        channels_last = not args.no_channels_last
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        if precision == "fp16":
            model = model.half()
            x = x.half()
        inputs = (x,)

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    with torch.inference_mode():
        for _ in range(args.warmup):
            model(*inputs)
        torch.cuda.synchronize()
        start.record()
        for _ in range(args.iterations):
            model(*inputs)
        end.record()
        end.synchronize()
    ms_total = start.elapsed_time(end)
    ms_per_iter = ms_total / args.iterations

    del model, inputs
    torch.cuda.empty_cache()
    return {
        "model": name,
        "precision": precision,
        "batch": batch,
        "channels_last": channels_last,
        "iterations": args.iterations,
        "ms_per_iter": ms_per_iter,
        "samples_per_s": batch * 1000.0 / ms_per_iter,
        "torch_version": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
    }


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torchvision

    if not torch.cuda.is_available():
        print("CUDA is not available; this benchmark needs a GPU", file=sys.stderr)
        return 1
    torch.backends.cudnn.benchmark = True

    for name in args.models:
        for precision in args.precisions:
            for batch in args.batch_sizes:
                rec = bench_one(torch, torchvision, args, name, precision, batch)
                print(json.dumps(rec), flush=True)
                print(f"{name} {precision} batch={batch} "
                      f"channels_last={rec['channels_last']}: "
                      f"{rec['samples_per_s']:.1f} samples/s, "
                      f"{rec['ms_per_iter']:.3f} ms/iter on {rec['gpu']} "
                      f"(torch {rec['torch_version']})", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
