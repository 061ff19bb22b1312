"""The anchor for fusiond's invisible mark: the `invisible-watermark` package's
dwtDct method (PyPI), on the same pictures and attacks as
tests/it/mark.rs (the shared photos at 640x480, JPEG q50, half size and back,
H.264 CRF 28 through ffmpeg, a 10 % crop), with a 32-bit payload. Prints its
PSNR and bit accuracy per attack, for BENCHMARKS.md's table beside fusiond's
(`cargo test --test it mark:: -- --nocapture` prints those).

It is not in the test venv: the package pulls in torch and a second OpenCV.
  python3 -m venv /tmp/anchor && /tmp/anchor/bin/pip install invisible-watermark
  /tmp/anchor/bin/python benches/mark_anchor.py ../shared/images
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
from imwatermark import WatermarkDecoder, WatermarkEncoder

PAYLOAD = 0xA5C3_1F40
BITS = [(PAYLOAD >> (31 - i)) & 1 for i in range(32)]


def h264(img, tmp):
    src, mp4, back = tmp / "in.png", tmp / "out.mp4", tmp / "back.png"
    cv2.imwrite(str(src), img)
    run = lambda *a: subprocess.run(["ffmpeg", "-v", "error", "-y", *a], check=True)
    run("-loop", "1", "-i", str(src), "-frames:v", "5", "-c:v", "libx264", "-crf", "28", "-pix_fmt", "yuv420p", str(mp4))
    run("-i", str(mp4), "-frames:v", "1", str(back))
    return cv2.imread(str(back))


def attacks(img, tmp):
    ok, jpg = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 50])
    half = cv2.resize(cv2.resize(img, (320, 240), interpolation=cv2.INTER_AREA), (640, 480), interpolation=cv2.INTER_LINEAR)
    return {"none": img, "jpeg q50": cv2.imdecode(jpg, cv2.IMREAD_COLOR), "half and back": half,
            "h264 crf28": h264(img, tmp), "crop 10%": img[29:29 + 432, 37:37 + 576]}


def main(images):
    encoder = WatermarkEncoder()
    encoder.set_watermark("bits", BITS)
    decoder = WatermarkDecoder("bits", 32)
    right, total, psnrs = {}, 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(Path(images).glob("*.[jp][pn]g")):
            plain = cv2.resize(cv2.imread(str(path)), (640, 480), interpolation=cv2.INTER_AREA)
            marked = encoder.encode(plain, "dwtDct")
            psnrs.append(cv2.PSNR(plain, marked))
            for name, img in attacks(marked, Path(tmp)).items():
                got = decoder.decode(img, "dwtDct")
                right[name] = right.get(name, 0) + sum(int(a == b) for a, b in zip(got, BITS))
            total += 32
    print(f"invisible-watermark dwtDct: PSNR {min(psnrs):.2f}-{max(psnrs):.2f} dB over {len(psnrs)} photos")
    for name, n in right.items():
        print(f"  {name:14} bit accuracy {100 * n / total:5.1f} %")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/images")
