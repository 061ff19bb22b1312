#!/usr/bin/env python3
"""Writes a swapper with inswapper_128's real architecture and size, with
random weights, for benchmarks only (not used by CI: it is ~550 MB).

  encoder  conv7x7 3->128 @128, conv3x3 128->256, conv3x3/2 256->512 (64),
           conv3x3/2 512->1024 (32)
  middle   6 style blocks at 32x32x1024: conv3x3 -> AdaIN -> ReLU -> conv3x3
           -> AdaIN, plus the residual; AdaIN's gamma/beta come from a Linear
           512->2048 of the source latent
  decoder  up x2, conv 1024->512; up x2, conv 512->256; conv 256->128;
           conv7x7 128->3; tanh; (x + 1) / 2

Same I/O contract as inswapper_128 (`target` [1,3,128,128] RGB 0..1, `source`
[1,512]; output RGB 0..1) and an emap stored as the last initializer. Writes
OUTDIR/inswapper_bench_128.onnx and OUTDIR/manifest.toml, and prints the
parameter count and GFLOP per swap (pass that to `fusiond bench --swap-gflop`).

usage: make_bench_swapper.py OUTDIR
"""
import hashlib
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
nodes, inits = [], []
stats = {"params": 0, "flops": 0}


def weight(name, shape, fan_in):
    w = (rng.standard_normal(shape, dtype=np.float32) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    inits.append(numpy_helper.from_array(w, name))
    stats["params"] += w.size
    return name


def const(name, array):
    inits.append(numpy_helper.from_array(np.asarray(array), name))
    return name


def conv(x, cin, cout, k, hw_out, stride=1, name=""):
    w = weight(f"{name}.w", (cout, cin, k, k), cin * k * k)
    b = const(f"{name}.b", np.zeros(cout, np.float32))
    stats["params"] += cout
    stats["flops"] += 2 * cin * cout * k * k * hw_out * hw_out
    y = f"{name}.y"
    nodes.append(helper.make_node("Conv", [x, w, b], [y], kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride] * 2))
    return y


def op(kind, inputs, name, **attrs):
    nodes.append(helper.make_node(kind, inputs, [name], **attrs))
    return name


def adain(x, latent, name):
    w = weight(f"{name}.fc.w", (512, 2048), 512)
    b = const(f"{name}.fc.b", np.concatenate([np.ones(1024), np.zeros(1024)]).astype(np.float32))
    stats["params"] += 2048
    stats["flops"] += 2 * 512 * 2048
    gb = op("Add", [op("MatMul", [latent, w], f"{name}.mm"), b], f"{name}.gb")
    nodes.append(helper.make_node("Split", [gb, "split_1024"], [f"{name}.g", f"{name}.b2"], axis=1))
    g = op("Reshape", [f"{name}.g", "shape_c1024"], f"{name}.g4")
    be = op("Reshape", [f"{name}.b2", "shape_c1024"], f"{name}.b4")
    n = op("InstanceNormalization", [x, "ones_1024", "zeros_1024"], f"{name}.in", epsilon=1e-5)
    return op("Add", [op("Mul", [n, g], f"{name}.scaled"), be], f"{name}.out")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    const("split_1024", np.array([1024, 1024], np.int64))
    const("shape_c1024", np.array([1, 1024, 1, 1], np.int64))
    const("ones_1024", np.ones(1024, np.float32))
    const("zeros_1024", np.zeros(1024, np.float32))
    const("up2", np.array([1, 1, 2, 2], np.float32))
    const("half", np.array(0.5, np.float32))

    x = op("Relu", [conv("target", 3, 128, 7, 128, name="enc0")], "enc0.r")
    x = op("Relu", [conv(x, 128, 256, 3, 128, name="enc1")], "enc1.r")
    x = op("Relu", [conv(x, 256, 512, 3, 64, stride=2, name="enc2")], "enc2.r")
    x = op("Relu", [conv(x, 512, 1024, 3, 32, stride=2, name="enc3")], "enc3.r")
    for i in range(6):
        y = op("Relu", [adain(conv(x, 1024, 1024, 3, 32, name=f"blk{i}.c1"), "source", f"blk{i}.a1")], f"blk{i}.r")
        y = adain(conv(y, 1024, 1024, 3, 32, name=f"blk{i}.c2"), "source", f"blk{i}.a2")
        x = op("Add", [x, y], f"blk{i}.res")
    x = op("Resize", [x, "", "up2"], "up0", mode="nearest")
    x = op("Relu", [conv(x, 1024, 512, 3, 64, name="dec0")], "dec0.r")
    x = op("Resize", [x, "", "up2"], "up1", mode="nearest")
    x = op("Relu", [conv(x, 512, 256, 3, 128, name="dec1")], "dec1.r")
    x = op("Relu", [conv(x, 256, 128, 3, 128, name="dec2")], "dec2.r")
    x = op("Tanh", [conv(x, 128, 3, 7, 128, name="dec3")], "dec3.t")
    op("Mul", [op("Add", [x, "ones_1024_scalar"], "plus1"), "half"], "output")
    const("ones_1024_scalar", np.array(1.0, np.float32))
    const("emap", (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32))

    graph = helper.make_graph(
        nodes, "inswapper_bench_128",
        [helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 128, 128]),
         helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(out, "inswapper_bench_128.onnx")
    onnx.save(model, path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    with open(os.path.join(out, "manifest.toml"), "w") as m:
        m.write('# Generated by models/make_bench_swapper.py: random weights, benchmarks only.\n\n')
        m.write(f'[[model]]\nname = "inswapper_bench"\nfile = "inswapper_bench_128.onnx"\nsha256 = "{h.hexdigest()}"\n')
        m.write('contract = "inswapper"\nlicence = "Apache-2.0 (generated by fusiond)"\n')
    gflop = stats["flops"] / 1e9
    print(f"{path}: {stats['params'] / 1e6:.1f} M parameters, {os.path.getsize(path) / 1e6:.0f} MB, {gflop:.1f} GFLOP per swap")


if __name__ == "__main__":
    main()
