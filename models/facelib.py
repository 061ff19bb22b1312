"""A NumPy/OpenCV re-implementation of fusiond's model contracts (from
../shared/reference/face-models.md), independent of the Rust code. The
onnxruntime agreement tests check fusiond against it, and models/quantize
uses it to build calibration data and to measure INT8 against FP32."""
import cv2
import numpy as np

ARCFACE_112_V2 = np.array([[0.34191607, 0.46157411], [0.65653393, 0.45983393], [0.500225, 0.64050536],
                           [0.37097589, 0.82469196], [0.63151696, 0.82325089]], np.float32)


def letterbox(bgr, size=640):
    """Shrink to fit (never enlarge) and paste into the top-left of a zero canvas."""
    h, w = bgr.shape[:2]
    if h > size or w > size:
        scale = min(size / h, size / w)
        bgr = cv2.resize(bgr, (int(w * scale), int(h * scale)))
    canvas = np.zeros((size, size, 3), np.uint8)
    canvas[: bgr.shape[0], : bgr.shape[1]] = bgr
    return canvas, w / bgr.shape[1], h / bgr.shape[0]


def prepare(canvas, contract):
    """Detector input: BGR kept; yunet raw 0..255, scrfd (x - 127.5)/128."""
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


def detect(session, contract, bgr):
    """Faces as (box, score, landmarks) in frame coordinates, best first."""
    canvas, rx, ry = letterbox(bgr)
    outs = session.run(None, {session.get_inputs()[0].name: prepare(canvas, contract)})
    boxes, scores, points = decode(outs, contract)
    scale = np.array([rx, ry, rx, ry], np.float32)
    return [(boxes[i] * scale, scores[i], points[i] * np.array([rx, ry], np.float32)) for i in nms(boxes, scores)]


def arcface_input(bgr, landmarks, mean=127.0, std=128.0):
    """The aligned 112 crop on arcface_112_v2, RGB, normalised, NCHW."""
    m, _ = cv2.estimateAffinePartial2D(np.asarray(landmarks, np.float32), ARCFACE_112_V2 * 112,
                                       method=cv2.RANSAC, ransacReprojThreshold=100)
    crop = cv2.warpAffine(bgr, m, (112, 112), borderMode=cv2.BORDER_REPLICATE)
    return ((crop[:, :, ::-1].astype(np.float32) - mean) / std).transpose(2, 0, 1)[None].copy()
