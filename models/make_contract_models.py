#!/usr/bin/env python3
"""Builds small ONNX models that follow fusiond's model contracts exactly.

No face-swap model can be downloaded here, so the swap stage is tested with
models whose behaviour is known in closed form:

  identity_swapper_128    inswapper contract; output = target. Proves the
                          alignment, inverse warp and mask.
  latent_color_swapper_128  inswapper contract; output = 0.5*target +
                          0.5*sigmoid(source @ W) per channel, so the colour
                          depends on the source latent.
  known_emap_swapper_128  inswapper contract with a known emap; outputs the
                          target and echoes `source`, so the latent that enters
                          the graph can be checked against NumPy.
  identity_enhancer_512   gfpgan contract at 512; output = input (in the
                          model's [-1, 1] space).
  inverting_enhancer_512  gfpgan contract at 512; output = -input: the face
                          comes back as its colour negative, so the blend
                          can be checked by the numbers.
  identity_hyperswap_256  hyperswap contract at 256; output = target (in the
                          model's mean/std 0.5 space), no emap.
  yolo_face_planted       yolo_face contract; a constant [1, 20, 8400] output
                          with planted rows, to test decoding end to end.
  short_recognizer_112    arcface contract input with a 128-d output: a
                          recogniser of the wrong length, which loading must
                          refuse (the face bank and the swappers take 512).

Each inswapper-shaped graph stores its emap as the last initializer, unused by
the compute graph, exactly as insightface's inswapper_128 does. The script also
writes manifest.toml (with computed SHA-256) and the NumPy reference values
for the latent test into OUTDIR.

usage: make_contract_models.py OUTDIR
"""
import hashlib
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SIZE = 128
LATENT = 512
OPSET = [helper.make_opsetid("", 13)]


def swapper_io(size=SIZE):
    return (
        [
            helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, size, size]),
            helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, LATENT]),
        ],
        helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size]),
    )


def emap_for(seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((LATENT, LATENT)) / np.sqrt(LATENT)).astype(np.float32)


def save(model, path):
    # The lowest IR version the opset allows (onnx writes its newest, which
    # the ONNX Runtime versions boxes carry refuse).
    model.ir_version = helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
    onnx.checker.check_model(model)
    onnx.save(model, path)


def identity_swapper(path, emap, size=SIZE):
    inputs, output = swapper_io(size)
    zero = numpy_helper.from_array(np.zeros((1,), np.float32), "zero")
    nodes = [
        # The source must stay wired in, as in every swapper: target + 0*sum(source).
        helper.make_node("ReduceSum", ["source"], ["s_sum"], keepdims=1),
        helper.make_node("Mul", ["s_sum", "zero"], ["s_zero"]),
        helper.make_node("Add", ["target", "s_zero"], ["output"]),
    ]
    inits = [zero] + ([numpy_helper.from_array(emap, "emap")] if emap is not None else [])
    graph = helper.make_graph(nodes, "identity_swapper", inputs, [output], inits)
    save(helper.make_model(graph, opset_imports=OPSET), path)


def latent_color_swapper(path, emap):
    inputs, output = swapper_io()
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((LATENT, 3)) * 4.0).astype(np.float32)
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.array([1, 3, 1, 1], np.int64), "shape4"),
        numpy_helper.from_array(np.array([0.5], np.float32), "half"),
        numpy_helper.from_array(emap, "emap"),
    ]
    nodes = [
        helper.make_node("MatMul", ["source", "w"], ["rgb"]),
        helper.make_node("Sigmoid", ["rgb"], ["rgb01"]),
        helper.make_node("Reshape", ["rgb01", "shape4"], ["colour"]),
        helper.make_node("Add", ["target", "colour"], ["mix"]),
        helper.make_node("Mul", ["mix", "half"], ["output"]),
    ]
    graph = helper.make_graph(nodes, "latent_color_swapper", inputs, [output], inits)
    save(helper.make_model(graph, opset_imports=OPSET), path)


def identity_enhancer(path, size=512):
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, size, size]) for n in ("input", "output")]
    graph = helper.make_graph([helper.make_node("Identity", ["input"], ["output"])], "identity_enhancer", [io[0]], [io[1]])
    save(helper.make_model(graph, opset_imports=OPSET), path)


def inverting_enhancer(path, size=512):
    # Output = -input: in the contract's [-1, 1] space the face comes back as
    # its colour negative (255 - pixel), a known change to assert the blend on.
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, size, size]) for n in ("input", "output")]
    graph = helper.make_graph([helper.make_node("Neg", ["input"], ["output"])], "inverting_enhancer", [io[0]], [io[1]])
    save(helper.make_model(graph, opset_imports=OPSET), path)


def known_emap_swapper(path, emap):
    inputs, output = swapper_io()
    echo = helper.make_tensor_value_info("source_echo", TensorProto.FLOAT, [1, LATENT])
    nodes = [
        helper.make_node("Identity", ["target"], ["output"]),
        helper.make_node("Identity", ["source"], ["source_echo"]),
    ]
    graph = helper.make_graph(nodes, "known_emap_swapper", inputs, [output, echo],
                              [numpy_helper.from_array(emap, "emap")])
    save(helper.make_model(graph, opset_imports=OPSET), path)


PLANTED = [
    # cx, cy, w, h, score, then 5 x (x, y, visibility), in 640x640 input pixels.
    [320, 240, 100, 120, 0.90, 300, 220, 1, 340, 220, 1, 320, 245, 1, 305, 270, 1, 335, 270, 1],
    [322, 242, 100, 120, 0.80, 302, 222, 1, 342, 222, 1, 322, 247, 1, 307, 272, 1, 337, 272, 1],
    [100, 100, 60, 60, 0.70, 88, 92, 1, 112, 92, 1, 100, 102, 1, 91, 115, 1, 109, 115, 1],
    [500, 500, 50, 50, 0.30, 490, 495, 1, 510, 495, 1, 500, 502, 1, 492, 512, 1, 508, 512, 1],
]


def yolo_face_planted(path):
    rows = np.zeros((8400, 20), np.float32)
    rows[: len(PLANTED)] = np.array(PLANTED, np.float32)
    const = rows.T[None]  # [1, 20, 8400], as exported by ultralytics
    inits = [numpy_helper.from_array(const, "planted"), numpy_helper.from_array(np.zeros((1,), np.float32), "zero")]
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["m"], keepdims=0),
        helper.make_node("Mul", ["m", "zero"], ["m0"]),
        helper.make_node("Add", ["planted", "m0"], ["output0"]),
    ]
    graph = helper.make_graph(
        nodes, "yolo_face_planted",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 640, 640])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 20, 8400])],
        inits,
    )
    save(helper.make_model(graph, opset_imports=OPSET), path)


def short_recognizer(path):
    w = np.full((3, 128), 0.01, np.float32)
    nodes = [
        helper.make_node("GlobalAveragePool", ["input"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes, "short_recognizer",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 112, 112])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 128])],
        [numpy_helper.from_array(w, "w")],
    )
    save(helper.make_model(graph, opset_imports=OPSET), path)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    emap = emap_for(1)
    known = emap_for(2)
    identity_swapper(os.path.join(out, "identity_swapper_128.onnx"), emap)
    latent_color_swapper(os.path.join(out, "latent_color_swapper_128.onnx"), emap)
    known_emap_swapper(os.path.join(out, "known_emap_swapper_128.onnx"), known)
    identity_swapper(os.path.join(out, "identity_hyperswap_256.onnx"), None, size=256)
    identity_enhancer(os.path.join(out, "identity_enhancer_512.onnx"))
    inverting_enhancer(os.path.join(out, "inverting_enhancer_512.onnx"))
    yolo_face_planted(os.path.join(out, "yolo_face_planted.onnx"))
    short_recognizer(os.path.join(out, "short_recognizer_112.onnx"))

    # NumPy reference for the latent: an unnormalised "raw" embedding.
    rng = np.random.default_rng(3)
    raw = (rng.standard_normal(LATENT) * 3.0).astype(np.float32)
    normed = raw / np.linalg.norm(raw)
    plain = normed @ known
    np.save(os.path.join(out, "known_emap_embedding.npy"), raw[None])
    np.save(os.path.join(out, "known_emap_latent_plain.npy"), plain[None].astype(np.float32))
    np.save(os.path.join(out, "known_emap_latent_renorm.npy"), (plain / np.linalg.norm(plain))[None].astype(np.float32))

    entries = [
        ("identity_swapper", "identity_swapper_128.onnx", "inswapper", {}),
        ("latent_color_swapper", "latent_color_swapper_128.onnx", "inswapper", {}),
        ("known_emap", "known_emap_swapper_128.onnx", "inswapper", {}),
        ("known_emap_renorm", "known_emap_swapper_128.onnx", "inswapper", {"renormalize_latent": "true"}),
        ("identity_hyperswap", "identity_hyperswap_256.onnx", "hyperswap", {}),
        ("identity_enhancer", "identity_enhancer_512.onnx", "gfpgan", {}),
        ("inverting_enhancer", "inverting_enhancer_512.onnx", "gfpgan", {}),
        ("yolo_face_planted", "yolo_face_planted.onnx", "yolo_face", {}),
        ("short_recognizer", "short_recognizer_112.onnx", "arcface", {}),
    ]
    with open(os.path.join(out, "manifest.toml"), "w") as m:
        m.write("# Generated by models/make_contract_models.py: contract test models.\n")
        for name, file, contract, extra in entries:
            m.write(f'\n[[model]]\nname = "{name}"\nfile = "{file}"\n')
            m.write(f'sha256 = "{sha256(os.path.join(out, file))}"\ncontract = "{contract}"\n')
            m.write('licence = "Apache-2.0 (generated by fusiond)"\n')
            for k, v in extra.items():
                m.write(f"{k} = {v}\n")
    print(f"contract models written to {out}")


if __name__ == "__main__":
    main()
