"""OpenCV's side of `fusiond-bench jpeg`: the median ms of RUNS encodes of
IMAGE with cv2.imencode at QUALITY (OpenCV's defaults otherwise: 4:2:0,
standard Huffman tables), then the output's size in bytes."""
import statistics
import sys
import time

import cv2

path, quality, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
img = cv2.imread(path, cv2.IMREAD_COLOR)
if img is None:
    sys.exit(f"cannot read {path}")
params = [cv2.IMWRITE_JPEG_QUALITY, quality]
ok, out = cv2.imencode(".jpg", img, params)
ms = []
for _ in range(runs):
    start = time.perf_counter()
    ok, out = cv2.imencode(".jpg", img, params)
    ms.append((time.perf_counter() - start) * 1e3)
if not ok:
    sys.exit("cv2.imencode failed")
print(f"{statistics.median(ms):.4f} {len(out)}")
