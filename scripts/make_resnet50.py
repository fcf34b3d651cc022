#!/usr/bin/env python3
"""Writes ResNet-50 (torchvision's layout: bottleneck blocks 3-4-6-3, stride on the 3x3) as ONNX,
with seeded random weights, for timing and memory figures on machines without PyTorch.

Weights are He-scaled and every BatchNormalization has running statistics near (0, 1), so the
activations stay in a sane range through the 53 convolutions: the figures measure the work a
real ResNet-50 does, not its accuracy. Needs numpy and onnx.

usage: make_resnet50.py OUT.onnx [--batch N] [--seed S]   (--batch 0: a dynamic batch axis)
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Graph:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def name(self, kind):
        self.count += 1
        return f"{kind}_{self.count}"

    def weight(self, name, array):
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv_bn(self, x, cin, cout, k, stride, relu=True):
        conv = self.name("conv")
        w = self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))
        self.nodes.append(helper.make_node(
            "Conv", [x, self.weight(conv + ".w", w)], [conv], name=conv,
            kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
        bn = self.name("bn")
        params = [
            self.rng.uniform(0.5, 1.0, cout),  # scale
            self.rng.uniform(-0.1, 0.1, cout),  # bias
            self.rng.uniform(-0.1, 0.1, cout),  # mean
            self.rng.uniform(0.8, 1.2, cout),  # var
        ]
        names = [self.weight(f"{bn}.{p}", v) for p, v in zip("sbmv", params)]
        self.nodes.append(helper.make_node("BatchNormalization", [conv] + names, [bn], name=bn))
        if not relu:
            return bn
        out = self.name("relu")
        self.nodes.append(helper.make_node("Relu", [bn], [out], name=out))
        return out

    def bottleneck(self, x, cin, width, stride):
        cout = width * 4
        y = self.conv_bn(x, cin, width, 1, 1)
        y = self.conv_bn(y, width, width, 3, stride)
        y = self.conv_bn(y, width, cout, 1, 1, relu=False)
        skip = x if (stride == 1 and cin == cout) else self.conv_bn(x, cin, cout, 1, stride, False)
        add, out = self.name("add"), self.name("relu")
        self.nodes.append(helper.make_node("Add", [y, skip], [add], name=add))
        self.nodes.append(helper.make_node("Relu", [add], [out], name=out))
        return out, cout


def build(batch, seed):
    g = Graph(seed)
    x = g.conv_bn("input", 3, 64, 7, 2)
    pool = g.name("maxpool")
    g.nodes.append(helper.make_node("MaxPool", [x], [pool], name=pool,
                                    kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x, c = pool, 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            x, c = g.bottleneck(x, c, width, stride if i == 0 else 1)
    gap = g.name("gap")
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], [gap], name=gap))
    flat = g.name("flatten")
    g.nodes.append(helper.make_node("Flatten", [gap], [flat], name=flat))
    w = g.rng.standard_normal((1000, c)) * np.sqrt(1.0 / c)
    g.nodes.append(helper.make_node(
        "Gemm", [flat, g.weight("fc.w", w), g.weight("fc.b", np.zeros(1000))], ["logits"],
        name="fc", transB=1))
    n = batch if batch > 0 else "N"
    graph = helper.make_graph(
        g.nodes, "resnet50",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [n, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [n, 1000])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    onnx.save(build(args.batch, args.seed), args.out)


if __name__ == "__main__":
    main()
