#!/usr/bin/env python3
"""The reference FaceFusion users have: the same models through onnxruntime's
Python API, with FaceFusion-style pre- and post-processing in NumPy/OpenCV,
on the same 640x480 frames that `fusiond-bench live` times.

Per frame: letterbox + detect + decode + NMS (models/facelib.py), ArcFace
alignment of each face on arcface_128 (cv2.estimateAffinePartial2D + RANSAC,
edge replication), the swapper, and paste-back over the face box only with
FaceFusion's box mask (blur 0.3, Gaussian), then a JPEG at quality 80.
The source embedding is computed once, as in fusiond.

  benches/reference_pipeline.py --models DIR... --detector yunet_2023mar
      --swapper identity_swapper --two FRAME --one PHOTO --source PHOTO
      [--runs 20] [--threads 1] [--json OUT]

Prints the median ms per stage for 1 and 2 faces; `benches/run.sh` puts it
beside fusiond's own figures.
"""
import argparse
import json
import statistics
import sys
import time
import tomllib
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))
import facelib  # noqa: E402

ARCFACE_128 = np.array([[0.36167656, 0.40387734], [0.63696719, 0.40235469], [0.50019687, 0.56044219],
                        [0.38710391, 0.72160547], [0.61507734, 0.72034453]], np.float32)
BUILTIN = Path(__file__).resolve().parent.parent / "models" / "manifest.toml"


def entries(dirs):
    """name -> (path, entry) over the manifests of `dirs`, first wins."""
    out = {}
    for d in dirs:
        d = Path(d)
        manifest = d / "manifest.toml" if (d / "manifest.toml").is_file() else BUILTIN
        for e in tomllib.loads(manifest.read_text())["model"]:
            out.setdefault(e["name"], (d / e["file"], e))
    return out


def session(path, threads):
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])


def box_mask(size, blur=0.3):
    amount = int(size * 0.5 * blur)
    edge = max(amount // 2, 1)
    m = np.ones((size, size), np.float32)
    m[:edge, :] = m[-edge:, :] = 0
    m[:, :edge] = m[:, -edge:] = 0
    return cv2.GaussianBlur(m, (0, 0), amount * 0.25) if amount > 0 else m


class Pipeline:
    def __init__(self, models, detector, recognizer, swapper, threads):
        self.contract = models[detector][1]["contract"]
        self.det = session(models[detector][0], threads)
        self.rec = session(models[recognizer][0], threads)
        self.swap = session(models[swapper][0], threads)
        self.mask = box_mask(128)
        self.t = {}

    def timed(self, stage, f, *a):
        s = time.perf_counter()
        r = f(*a)
        self.t[stage] = self.t.get(stage, 0.0) + (time.perf_counter() - s) * 1e3
        return r

    def embed(self, bgr):
        box, _, lm = facelib.detect(self.det, self.contract, bgr)[0]
        x = facelib.arcface_input(bgr, lm)
        e = self.rec.run(None, {self.rec.get_inputs()[0].name: x})[0][0]
        return (e / np.linalg.norm(e)).astype(np.float32)[None]

    def frame(self, bgr, latent):
        self.t = {}
        canvas, rx, ry = self.timed("pixel", facelib.letterbox, bgr)
        x = self.timed("pixel", facelib.prepare, canvas, self.contract)
        outs = self.timed("inference", self.det.run, None, {self.det.get_inputs()[0].name: x})

        def post():
            boxes, scores, points = facelib.decode(outs, self.contract)
            keep = facelib.nms(boxes, scores)
            return [(boxes[i] * [rx, ry, rx, ry], points[i] * [rx, ry]) for i in keep]
        faces = self.timed("pixel", post)
        for _, lm in faces:
            def align():
                m, _ = cv2.estimateAffinePartial2D(lm.astype(np.float32), ARCFACE_128 * 128, method=cv2.RANSAC,
                                                   ransacReprojThreshold=100)
                crop = cv2.warpAffine(bgr, m, (128, 128), borderMode=cv2.BORDER_REPLICATE)
                return m, (crop[:, :, ::-1].astype(np.float32) / 255.0).transpose(2, 0, 1)[None].copy()
            m, target = self.timed("pixel", align)
            out = self.timed("inference", self.swap.run, None, {"target": target, "source": latent})[0]

            def paste():
                crop = (out[0].transpose(1, 2, 0)[:, :, ::-1].clip(0, 1) * 255).astype(np.float32)
                inv = cv2.invertAffineTransform(m)
                corners = cv2.transform(np.array([[[0, 0], [128, 0], [0, 128], [128, 128]]], np.float32), inv)[0]
                x1, y1 = np.floor(corners.min(0)).astype(int).clip(0, [bgr.shape[1], bgr.shape[0]])
                x2, y2 = np.ceil(corners.max(0)).astype(int).clip(0, [bgr.shape[1], bgr.shape[0]])
                if x2 <= x1 or y2 <= y1:
                    return
                inv[:, 2] -= [x1, y1]
                size = (int(x2 - x1), int(y2 - y1))
                warped = cv2.warpAffine(crop, inv, size, borderMode=cv2.BORDER_REPLICATE)
                mask = cv2.warpAffine(self.mask, inv, size)[:, :, None]
                region = bgr[y1:y2, x1:x2].astype(np.float32)
                bgr[y1:y2, x1:x2] = (region * (1 - mask) + warped * mask).astype(np.uint8)
            self.timed("pixel", paste)
        self.timed("jpeg", cv2.imencode, ".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 80])
        return len(faces)


def fit(path):
    img = cv2.imread(str(path))
    if img is None:
        sys.exit(f"cannot read {path}")
    return cv2.resize(img, (640, 480), interpolation=cv2.INTER_LINEAR) if img.shape[:2] != (480, 640) else img


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", action="append", required=True)
    ap.add_argument("--detector", default="yunet_2023mar")
    ap.add_argument("--recognizer", default="arcface_fr")
    ap.add_argument("--swapper", required=True)
    ap.add_argument("--two", required=True)
    ap.add_argument("--one", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args()
    models = entries(a.models)
    for n in (a.detector, a.recognizer, a.swapper):
        if n not in models or not models[n][0].is_file():
            sys.exit(f"model {n} is not present in {a.models}")
    p = Pipeline(models, a.detector, a.recognizer, a.swapper, a.threads)
    latent = p.embed(cv2.imread(a.source))
    emap_entry = models[a.swapper][1]
    if emap_entry.get("contract") == "inswapper":
        import onnx
        g = onnx.load(str(models[a.swapper][0])).graph
        emap = onnx.numpy_helper.to_array(g.initializer[-1])
        latent = latent @ emap
        latent = latent / np.linalg.norm(latent)
    rows = {}
    print(f"reference pipeline (onnxruntime {ort.__version__} CPU, {a.threads} thread(s), NumPy/OpenCV "
          f"{cv2.__version__}): {a.detector}, {a.swapper}; {a.runs} runs, median ms")
    print(f"  {'scenario':<10} {'inference':>9} {'pixelwork':>9} {'jpeg':>7} {'non-infer':>9} {'e2e':>8}")
    for label, path in (("1 face", a.one), ("2 faces", a.two)):
        frame = fit(path)
        per = {"inference": [], "pixel": [], "jpeg": [], "total": []}
        p.frame(frame.copy(), latent)
        n = 0
        for _ in range(a.runs):
            img = frame.copy()
            s = time.perf_counter()
            n = p.frame(img, latent)
            per["total"].append((time.perf_counter() - s) * 1e3)
            for k in ("inference", "pixel", "jpeg"):
                per[k].append(p.t.get(k, 0.0))
        med = {k: statistics.median(v) for k, v in per.items()}
        med["non_infer"] = med["pixel"] + med["jpeg"]
        rows[label] = dict(med, faces=n)
        print(f"  {label + f' ({n})':<10} {med['inference']:>9.2f} {med['pixel']:>9.2f} {med['jpeg']:>7.2f} "
              f"{med['non_infer']:>9.2f} {med['total']:>8.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
