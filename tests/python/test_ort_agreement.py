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

import sys

import cv2
import numpy as np
import onnxruntime as ort
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "models"))
from facelib import detect, iou  # noqa: E402
from facelib import arcface_input  # noqa: E402

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


def require(path):
    if not Path(path).exists():
        pytest.fail(f"missing {path}: these tests need the shared data (FUSIOND_SHARED) and the built "
                    f"fusiond binary (FUSIOND_BIN)")
    return str(path)


def fusiond(*args):
    out = subprocess.run([require(BIN), *map(str, args)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def reference_faces(model, contract, photo):
    sess = ort.InferenceSession(str(MODELS / model), providers=["CPUExecutionProvider"])
    return detect(sess, contract, cv2.imread(require(IMAGES / photo)))


def reference_embedding(photo, landmarks=None):
    """ArcFace embedding of the photo's first face; its landmarks come from the
    reference detector unless given."""
    bgr = cv2.imread(require(IMAGES / photo))
    if landmarks is None:
        landmarks = reference_faces("scrfd_500m_bnkps.onnx", "scrfd", photo)[0][2]
    x = arcface_input(bgr, landmarks)
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


def test_generated_models_use_the_lowest_ir_version_their_opset_allows(tmp_path):
    """The generators' files load in the ONNX Runtime versions boxes carry:
    onnx writes its newest IR version (14 with onnx 1.23), which ONNX
    Runtime 1.28 refuses, so each generator sets the lowest its opset allows."""
    import onnx
    from onnx import helper

    contract = Path(os.environ.get("FUSIOND_CONTRACT_MODELS") or tmp_path / "contract")
    if not (contract / "manifest.toml").exists():
        subprocess.run([sys.executable, str(ROOT / "models" / "make_contract_models.py"), str(contract)], check=True)
    files = sorted(contract.glob("*.onnx"))
    assert files, f"no models in {contract}"
    for f in files:
        model = onnx.load(str(f), load_external_data=False)
        lowest = helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
        assert model.ir_version == lowest, f"{f.name}: IR version {model.ir_version}, its opset allows {lowest}"
    # The inswapper-size bench swapper (554 MB, about 20 s), loaded by onnxruntime.
    bench = tmp_path / "bench"
    subprocess.run([sys.executable, str(ROOT / "models" / "make_bench_swapper.py"), str(bench)],
                   check=True, capture_output=True)
    model = onnx.load(str(bench / "inswapper_bench_128.onnx"), load_external_data=False)
    assert model.ir_version == helper.find_min_ir_version_for(list(model.opset_import))
    ort.InferenceSession(str(bench / "inswapper_bench_128.onnx"), providers=["CPUExecutionProvider"])
