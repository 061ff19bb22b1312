#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, from the real files: the photos and
camera frames in ../shared, the repository's config and manifest, and face
bank / emap files and V4L2 buffers built from them (ffmpeg converts a real
frame to YUYV and NV12). Each target's input layout is in tests/fuzz/src/lib.rs.

  tests/fuzz/seeds.py SHARED OUT     (writes OUT/<target>/seed-*)
"""
import json
import struct
import subprocess
import sys
from pathlib import Path

FEATURES = ["enabled", "source", "quality", "blend", "selector", "face_order", "color_transfer", "mouth_mask",
            "map", "frame_rate", "mask_blur", "mask_padding", "reference_distance", "forget", "snapshot", "reload"]
PAYLOADS = {"enabled": b"ON", "quality": b"fast", "blend": b"80", "selector": b"many", "face_order": b"large-small",
            "color_transfer": b"rct", "mouth_mask": b"OFF", "map": b"alice=bob,carol=bob", "frame_rate": b"2.5",
            "mask_blur": b"0.3", "mask_padding": b"0,5,10,5", "reference_distance": b"0.6", "forget": b"alice", "snapshot": b"PRESS",
            "reload": b"PRESS", "source": b"alice,alice2"}
TOKEN = "fuzz-token-0123456789"


def safetensors(tensors):
    header, data = {}, b""
    for name, shape, values in tensors:
        raw = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    head = json.dumps(header).encode()
    return struct.pack("<Q", len(head)) + head + data


def raw_frame(jpeg, w, h, pix_fmt):
    return subprocess.run(["ffmpeg", "-v", "error", "-i", str(jpeg), "-vf", f"scale={w}:{h}", "-pix_fmt", pix_fmt,
                           "-f", "rawvideo", "-"], check=True, capture_output=True).stdout


def mjpeg(jpeg, w, h):
    return subprocess.run(["ffmpeg", "-v", "error", "-i", str(jpeg), "-vf", f"scale={w}:{h}", "-f", "mjpeg", "-"],
                          check=True, capture_output=True).stdout


def png_bomb(w, h):
    """A real decompression bomb: a PNG of w x h black RGB pixels, whose
    zlib stream of zeros is about 1/1000 of its decoded size."""
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = zlib.compress(b"".join(b"\0" + b"\0" * (3 * w) for _ in range(h)), 9)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def jpeg_claiming(jpeg, w, h):
    """`jpeg` with its first frame header (SOF0/SOF2) claiming w x h."""
    data = bytearray(jpeg)
    i = 2
    while i + 9 < len(data):
        marker, length = data[i + 1], int.from_bytes(data[i + 2:i + 4], "big")
        if marker in (0xC0, 0xC2):
            data[i + 5:i + 9] = struct.pack(">HH", h, w)
            return bytes(data)
        i += 2 + length
    raise ValueError("no SOF0/SOF2 marker")


def frame_seed(kind, w, h, stride, data):
    return bytes([kind]) + struct.pack("<HH", w, h) + stride.to_bytes(3, "little") + data


def http_seeds(photo):
    auth = f"Host: 127.0.0.1:8080\r\nContent-Type: application/json\r\nAuthorization: Bearer {TOKEN}\r\n"
    reqs = ["GET / HTTP/1.1\r\nHost: box\r\n\r\n", "GET /api/state HTTP/1.1\r\nHost: localhost\r\n\r\n", "HEAD /api/health HTTP/1.1\r\n\r\n",
            "GET /metrics HTTP/1.0\r\n\r\n", "GET /snapshot.jpg HTTP/1.1\r\n\r\n", "GET /stream.mjpeg HTTP/1.1\r\n\r\n",
            f"POST /api/blend HTTP/1.1\r\n{auth}Content-Length: 2\r\n\r\n80",
            "POST /api/enabled HTTP/1.1\r\nHost: box\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nOFF",
            "POST /api/blend HTTP/1.1\r\nHost: evil.example\r\nOrigin: http://evil.example\r\nContent-Length: 2\r\n\r\n80",
            f"POST /api/mask_padding HTTP/1.1\r\n{auth}Content-Length: 8\r\n\r\n0,5,10,5",
            "DELETE /api/state HTTP/1.1\r\n\r\n", "GET /nope?x=1 HTTP/1.1\r\n\r\n",
            f"POST /api/reload HTTP/1.1\r\n{auth}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"]
    out = [bytes([64]) + r.encode() for r in reqs]
    head = f"POST /api/source HTTP/1.1\r\n{auth}Content-Length: {len(photo)}\r\n\r\n".encode()
    return out + [bytes([255]) + head + photo, bytes([1]) + b"GET /api/state HTTP/1.1\r\n\r\n"]


def main(shared, out):
    shared, out = Path(shared), Path(out)
    repo = Path(__file__).resolve().parents[2]
    photos = sorted((shared / "images").glob("*.jpg")) + sorted((shared / "images").glob("*.png"))
    frame = shared / "camera/two_people_pan/frame_001.jpg"
    small = min(photos, key=lambda p: p.stat().st_size).read_bytes()
    config = (repo / "config/fusiond.toml").read_text()
    fragment = '[camera]\nwidth = 320\nheight = 240\n\n[[tier]]\nname = "fast"\nmodels = ["yunet_2023mar"]\n'
    emb = [((i * 37) % 101 - 50) / 400 for i in range(512)]
    seeds = {
        "command": [bytes([i]) + PAYLOADS[f] for i, f in enumerate(FEATURES)]
        + [bytes([1]) + small, bytes([1]) + b"alice\n" + small, bytes([200]) + b"stall\nnow"],
        "config": [config.encode(), (config + "\n%%\n" + fragment).encode(), fragment.encode()],
        "manifest": [(repo / "models/manifest.toml").read_bytes()],
        "bank": [safetensors([("alice", [512], emb), ("bob", [512], emb[::-1])]),
                 safetensors([("emap", [2, 512], emb + emb)])],
        # The photos, and bombs at the daemon's own 24 MP limit
        # (pipeline.max_source_pixels): one pixel row under it and over it.
        "source_image": [p.read_bytes() for p in photos] + [b"obama\n" + small]
        + [png_bomb(6000, 4000), png_bomb(6000, 4001), png_bomb(1000, 1000),
           jpeg_claiming(small, 6000, 4000), jpeg_claiming(small, 6000, 4001)],
        "frame": [frame_seed(0, 64, 48, 128, raw_frame(frame, 64, 48, "yuyv422")),
                  frame_seed(1, 64, 48, 64, raw_frame(frame, 64, 48, "nv12")),
                  frame_seed(2, 64, 48, 0, mjpeg(frame, 64, 48)),
                  frame_seed(0, 32, 24, 80, b"".join(r + b"\xee" * 16 for r in chunks(raw_frame(frame, 32, 24,
                                                                                              "yuyv422"), 64)))],
        "http": http_seeds(small),
    }
    for target, items in seeds.items():
        d = out / target
        d.mkdir(parents=True, exist_ok=True)
        for i, data in enumerate(items):
            (d / f"seed-{i:02}").write_bytes(data)
    print("fuzz seeds: " + ", ".join(f"{t} {len(v)}" for t, v in seeds.items()))


def chunks(data, n):
    return [data[i:i + n] for i in range(0, len(data), n)]


if __name__ == "__main__":
    main(*sys.argv[1:3])
