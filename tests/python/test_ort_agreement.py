"""fusiond (tract) against an independent reference: onnxruntime + NumPy/OpenCV.

The reference re-implements the contracts of ../shared/reference/face-models.md
from scratch (letterbox, decoding, NMS, ArcFace alignment) and runs the same
model files in onnxruntime. fusiond is driven through its command line.

Environment: FUSIOND_BIN (the fusiond binary), FUSIOND_SHARED (default
../shared next to the checkout).
"""
import json
import os
import subprocess
import tempfile
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("FUSIOND_SHARED", ROOT.parent / "shared"))
BIN = os.environ.get("FUSIOND_BIN", str(ROOT / "target" / "release" / "fusiond"))
MODELS = SHARED / "models"
IMAGES = SHARED / "images"

DETECTORS = {
    "yunet_2023mar": ("face_detection_yunet_2023mar.onnx", "yunet"),
    "yunet_n_dynamic": ("yunet_n_dynamic.onnx", "yunet"),
    "scrfd_500m": ("scrfd_500m_bnkps.onnx", "scrfd"),
}
PHOTOS = ["fr_obama.jpg", "fr_two_people.jpg", "fr_obama_and_biden.jpg", "pexels_blazeface_Test3.jpg", "skimage_astronaut.png"]
ARCFACE_112_V2 = np.array([[0.34191607, 0.46157411], [0.65653393, 0.45983393], [0.500225, 0.64050536],
                           [0.37097589, 0.82469196], [0.63151696, 0.82325089]], np.float32)


def require(path):
    if not Path(path).exists():
        pytest.fail(f"missing {path}: these tests need the shared data (FUSIOND_SHARED) and the built "
                    f"fusiond binary (FUSIOND_BIN)")
    return str(path)


def fusiond(*args):
    out = subprocess.run([require(BIN), *map(str, args)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


# ---- the reference pipeline -------------------------------------------------

def letterbox(bgr, size=640):
    h, w = bgr.shape[:2]
    if h > size or w > size:
        scale = min(size / h, size / w)
        bgr = cv2.resize(bgr, (int(w * scale), int(h * scale)))
    canvas = np.zeros((size, size, 3), np.uint8)
    canvas[: bgr.shape[0], : bgr.shape[1]] = bgr
    return canvas, w / bgr.shape[1], h / bgr.shape[0]


def prepare(canvas, contract):
    x = canvas.astype(np.float32)
    if contract == "scrfd":
        x = (x - 127.5) / 128.0
    return x.transpose(2, 0, 1)[None].copy()


def decode(outs, contract, size=640, thr=0.5):
    boxes, scores, points = [], [], []
    for i, s in enumerate([8, 16, 32]):
        n = size // s
        ys, xs = np.mgrid[0:n, 0:n]
        anchors = np.stack([xs, ys], -1).reshape(-1, 2).astype(np.float32) * s
        if contract == "yunet":
            score = (np.clip(outs[i], 0, 1) * np.clip(outs[3 + i], 0, 1)).reshape(-1)
            bb, kp = outs[6 + i].reshape(-1, 4), outs[9 + i].reshape(-1, 10)
            c = bb[:, :2] * s + anchors
            wh = np.exp(bb[:, 2:]) * s
            box = np.concatenate([c - wh / 2, c + wh / 2], 1)
        else:
            anchors = np.repeat(anchors, 2, axis=0)
            score = outs[i].reshape(-1)
            bb, kp = outs[3 + i].reshape(-1, 4) * s, outs[6 + i].reshape(-1, 10)
            box = np.concatenate([anchors - bb[:, :2], anchors + bb[:, 2:]], 1)
        pts = kp.reshape(-1, 5, 2) * s + anchors[:, None]
        keep = score > thr
        boxes.append(box[keep]); scores.append(score[keep]); points.append(pts[keep])
    return np.concatenate(boxes), np.concatenate(scores), np.concatenate(points)


def iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def nms(boxes, scores, thr=0.4):
    keep = []
    for i in np.argsort(-scores):
        if all(iou(boxes[i], boxes[k]) <= thr for k in keep):
            keep.append(i)
    return keep


def reference_faces(model, contract, photo):
    bgr = cv2.imread(require(IMAGES / photo))
    canvas, rx, ry = letterbox(bgr)
    sess = ort.InferenceSession(str(MODELS / model), providers=["CPUExecutionProvider"])
    outs = sess.run(None, {sess.get_inputs()[0].name: prepare(canvas, contract)})
    boxes, scores, points = decode(outs, contract)
    keep = nms(boxes, scores)
    scale = np.array([rx, ry, rx, ry], np.float32)
    return [(boxes[i] * scale, scores[i], points[i] * np.array([rx, ry], np.float32)) for i in keep]


def reference_embedding(photo, landmarks=None):
    """ArcFace embedding of the photo's first face; its landmarks come from the
    reference detector unless given."""
    bgr = cv2.imread(require(IMAGES / photo))
    if landmarks is None:
        landmarks = reference_faces("scrfd_500m_bnkps.onnx", "scrfd", photo)[0][2]
    landmarks = np.asarray(landmarks, np.float32)
    m, _ = cv2.estimateAffinePartial2D(landmarks, ARCFACE_112_V2 * 112, method=cv2.RANSAC, ransacReprojThreshold=100)
    crop = cv2.warpAffine(bgr, m, (112, 112), borderMode=cv2.BORDER_REPLICATE)
    x = ((crop[:, :, ::-1].astype(np.float32) - 127.0) / 128.0).transpose(2, 0, 1)[None].copy()
    sess = ort.InferenceSession(str(MODELS / "arcface_fr_feature.onnx"), providers=["CPUExecutionProvider"])
    e = sess.run(None, {"input": x})[0][0]
    return e / np.linalg.norm(e)


# ---- the tests -------------------------------------------------------------

@pytest.mark.parametrize("detector", sorted(DETECTORS))
@pytest.mark.parametrize("photo", PHOTOS)
def test_detections_match_onnxruntime(detector, photo):
    model, contract = DETECTORS[detector]
    ours = json.loads(fusiond("detect", IMAGES / photo, "--models", MODELS, "--detector", detector, "--json"))
    ref = reference_faces(model, contract, photo)
    assert len(ours["faces"]) == len(ref), (ours["faces"], ref)
    for box, score, pts in ref:
        best = max(ours["faces"], key=lambda f: iou(f["box"], box))
        assert iou(best["box"], box) >= 0.95, (best["box"], box)
        assert abs(best["score"] - score) < 0.02
        assert np.abs(np.array(best["landmarks"]) - pts).max() < 0.02 * (box[2] - box[0])


@pytest.mark.parametrize("photo", ["fr_obama.jpg", "fr_obama2.jpg", "fr_biden.jpg"])
def test_embeddings_match_onnxruntime(photo):
    ours = json.loads(fusiond("detect", IMAGES / photo, "--models", MODELS, "--detector", "scrfd_500m", "--embed", "--json"))
    face = ours["faces"][0]
    e = np.array(face["embedding"], np.float32)
    # Same inputs (fusiond's landmarks): alignment, warp and model must agree.
    same_input = float(e @ reference_embedding(photo, face["landmarks"]))
    assert same_input >= 0.999, same_input
    # End to end, each side with its own detector: landmarks differ by a few
    # tenths of a pixel on these 1-2k px photos, which costs up to ~0.002.
    end_to_end = float(e @ reference_embedding(photo))
    assert end_to_end >= 0.995, end_to_end


@pytest.mark.parametrize("name,file,shape", [
    ("yunet_2023mar", "face_detection_yunet_2023mar.onnx", (1, 3, 640, 640)),
    ("yunet_n_dynamic", "yunet_n_dynamic.onnx", (1, 3, 480, 640)),
    ("scrfd_500m", "scrfd_500m_bnkps.onnx", (1, 3, 640, 640)),
    ("arcface_fr", "arcface_fr_feature.onnx", (1, 3, 112, 112)),
    ("landmark68_fr", "landmark68_fr.onnx", (1, 1, 64, 64)),
])
def test_raw_outputs_match_onnxruntime_on_a_real_photo(name, file, shape):
    bgr = cv2.imread(require(IMAGES / "fr_two_people.jpg"))
    img = cv2.resize(bgr, (shape[3], shape[2]))
    if shape[1] == 1:
        x = (cv2.cvtColor(img, cv2.COLOR_BGR2GRAY).astype(np.float32) / 256.0)[None, None]
    else:
        x = ((img.astype(np.float32) - 127.5) / 128.0).transpose(2, 0, 1)[None]
    x = np.ascontiguousarray(x, np.float32)
    sess = ort.InferenceSession(str(MODELS / file), providers=["CPUExecutionProvider"])
    input_name = sess.get_inputs()[0].name
    want = sess.run(None, {input_name: x})
    with tempfile.TemporaryDirectory() as tmp:
        np.save(f"{tmp}/in.npy", x)
        fusiond("infer", name, "--input", f"{input_name}={tmp}/in.npy", "--output-dir", tmp, "--models", MODELS)
        for out, ref in zip(sess.get_outputs(), want):
            safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in out.name)
            got = np.load(f"{tmp}/{safe}.npy")
            assert got.size == ref.size, (out.name, got.shape, ref.shape)
            err = np.abs(got.reshape(-1) - ref.reshape(-1)).max()
            assert err <= 1e-3 * max(1.0, np.abs(ref).max()), f"{out.name}: max abs diff {err}"
