#!/usr/bin/env python3
"""Exports a DistilBERT-class sequence classifier to ONNX, with random seeded weights.

Six encoder layers, hidden 768, 12 heads, feed-forward 3072, vocabulary 30522, learned
positions up to 512 tokens; int64 `input_ids` and `attention_mask`, both [batch, seq] with
named dynamic axes; the padding mask is added to the attention scores as Hugging Face models
do it ((1 - mask) * float32 min); mean pooling over the unpadded tokens; two classes. Written
out here (no `transformers` needed) so the graph is the plain ONNX ops a TensorRT user exports:
Gather, LayerNormalization, MatMul, Softmax, Gelu (Erf), Where-free masking.

    python3 scripts/export_token_model.py --out /tmp/models/distilbert_like.onnx
"""
import argparse
import math

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden)
        self.ff1 = nn.Linear(hidden, ffn)
        self.ff2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden)

    def forward(self, x, bias):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(x).split(h, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + bias
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


class Classifier(nn.Module):
    def __init__(self, vocab=30522, hidden=768, heads=12, ffn=3072, layers=6, positions=512, classes=2):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(positions, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(Layer(hidden, heads, ffn) for _ in range(layers))
        self.head = nn.Linear(hidden, classes)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.ln(self.tokens(input_ids) + self.positions(pos))
        mask = attention_mask.to(torch.float32)
        bias = (1.0 - mask[:, None, None, :]) * torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, bias)
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdim=True)
        return self.head(pooled)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--dynamo", action="store_true", help="use torch.onnx's dynamo exporter")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    model = Classifier(vocab=args.vocab, hidden=args.hidden, heads=args.heads, ffn=args.ffn,
                       layers=args.layers).eval()
    ids = torch.randint(0, args.vocab, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    kw = dict(
        input_names=["input_ids", "attention_mask"],
        output_names=["logits"],
        dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                      "logits": {0: "batch"}},
        opset_version=17,
    )
    with torch.no_grad():
        try:
            torch.onnx.export(model, (ids, mask), args.out, dynamo=args.dynamo, **kw)
        except TypeError:  # torch before 2.5 has no `dynamo` argument
            torch.onnx.export(model, (ids, mask), args.out, **kw)
    print(args.out)


if __name__ == "__main__":
    main()
