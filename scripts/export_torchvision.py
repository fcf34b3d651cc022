#!/usr/bin/env python3
"""Export torchvision classifiers to ONNX with a dynamic batch axis (random weights).

Pretrained weights cannot be downloaded everywhere; for timing and for comparing backends,
random weights are enough. Run it where PyTorch and torchvision are installed:

    python3 scripts/export_torchvision.py resnet50 mobilenet_v3_large --out models/

Each model is written as <out>/<name>.onnx with input `input` [batch,3,224,224] and output
`logits` [batch,1000]; weights are seeded, so two exports are identical.
"""
import argparse
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="torchvision model names, e.g. resnet50 mobilenet_v3_large")
    parser.add_argument("--out", default="models", help="output folder (default: models/)")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--size", type=int, default=224, help="input height and width")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import torch
    import torchvision

    os.makedirs(args.out, exist_ok=True)
    for name in args.models:
        torch.manual_seed(args.seed)
        model = torchvision.models.get_model(name, weights=None).eval()
        dummy = torch.randn(1, 3, args.size, args.size)
        path = os.path.join(args.out, f"{name}.onnx")
        tmp = path + ".tmp"
        torch.onnx.export(
            model,
            dummy,
            tmp,
            input_names=["input"],
            output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
            opset_version=args.opset,
            dynamo=False,
        )
        os.replace(tmp, path)
        print(f"{path}: {os.path.getsize(path) / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
