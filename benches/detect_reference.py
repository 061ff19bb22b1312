#!/usr/bin/env python3
"""The Python + onnxruntime reference for `fusiond detect`: the same work
per image (read and decode the file, letterbox, detect, decode, NMS, one
JSON line of boxes, scores and landmarks), one session at one thread.
benches/detect_margin.sh times it beside `fusiond detect`.

  benches/detect_reference.py --models DIR --detector NAME [--threads 1] IMAGE...
"""
import argparse
import json
import sys
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))
import facelib  # noqa: E402
from reference_pipeline import entries, session  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", action="append", required=True)
    ap.add_argument("--detector", default="yunet_2023mar")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("images", nargs="+")
    a = ap.parse_args()
    path, entry = entries(a.models)[a.detector]
    det = session(path, a.threads)
    for image in a.images:
        bgr = cv2.imread(image)
        faces = facelib.detect(det, entry["contract"], bgr)
        print(json.dumps({"image": image, "faces": [{"box": [float(v) for v in b], "score": float(s),
                                                     "landmarks": [[float(x), float(y)] for x, y in lm]}
                                                    for b, s, lm in faces]}))


if __name__ == "__main__":
    main()
