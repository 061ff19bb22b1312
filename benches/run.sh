#!/usr/bin/env bash
# The benchmark suite behind BENCHMARKS.md, in one run on one machine:
#   1. each model on tract and ONNX Runtime (CPU), FP32 and INT8 QDQ, 1 and 2 threads;
#   2. the full pipeline per 640x480 frame (1 and 2 faces) on each engine and in
#      the NumPy/OpenCV + onnxruntime reference FaceFusion users have;
#   3. the roofline of the inswapper-size swap;
#   4. JPEG encoding against OpenCV (and the encoder fusiond used before).
# usage: benches/run.sh [WORKDIR]   (after tests/setup.sh; WORKDIR keeps the
# generated models between runs; default: a temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/fusiond-target}"
py="${FUSIOND_PYTHON:-$HOME/.cache/fusiond-venv/bin/python}"
shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
runs="${BENCH_RUNS:-20}"

# The benchmark binary (benches/fusiond-bench), built in the edge profile.
bin="$(cargo bench --features ort --bench fusiond-bench --no-run --quiet --message-format=json |
    "$py" -c 'import json, sys; print([j["executable"] for j in map(json.loads, sys.stdin) if j.get("executable") and j["target"]["name"] == "fusiond-bench"][-1])')"
lib="$("$py" -c 'import glob, os, onnxruntime as o; print(sorted(glob.glob(os.path.join(os.path.dirname(o.__file__), "capi", "libonnxruntime.so.*")))[-1])')"
[ -f "$work/int8/manifest.toml" ] ||
    "$py" models/quantize --models "$shared/models" --photos "$shared/images" --out "$work/int8" >/dev/null
[ -f "$work/contract/manifest.toml" ] || "$py" models/make_contract_models.py "$work/contract" >/dev/null
[ -f "$work/swapper/gflop" ] || {
    mkdir -p "$work/swapper"
    "$py" models/make_bench_swapper.py --int8 "$work/swapper" 2>/dev/null | tee "$work/swapper/log"
    grep -o '[0-9.]* GFLOP per swap' "$work/swapper/log" | cut -d' ' -f1 >"$work/swapper/gflop"
}

# ORT-format copies (zero copy in ONNX Runtime) of the recogniser and the swapper, as `<name>_ort`.
[ -f "$work/ortfmt/manifest.toml" ] || "$py" - "$shared/models" "$work/swapper" "$work/ortfmt" <<'PY'
import hashlib, pathlib, subprocess, sys, tomllib
shared, swapper, out = map(pathlib.Path, sys.argv[1:])
out.mkdir(parents=True, exist_ok=True)
builtin = tomllib.loads(pathlib.Path("models/manifest.toml").read_text())["model"]
bench = tomllib.loads((swapper / "manifest.toml").read_text())["model"]
lines = ["# ORT-format copies for benches/run.sh\n"]
for name, src, entries in (("arcface_fr", shared, builtin), ("inswapper_bench", swapper, bench)):
    e = next(m for m in entries if m["name"] == name)
    subprocess.run([sys.executable, "-m", "onnxruntime.tools.convert_onnx_models_to_ort", str(src / e["file"]),
                    "--output_dir", str(out), "--optimization_style", "Fixed"], check=True, capture_output=True)
    ort_file = pathlib.Path(e["file"]).with_suffix(".ort").name
    sha = hashlib.sha256((out / ort_file).read_bytes()).hexdigest()
    lines.append(f'[[model]]\nname = "{name}_ort"\nfile = "{ort_file}"\nsha256 = "{sha}"\ncontract = "{e["contract"]}"\n')
    for k in ("input_size", "licence"):
        if k in e:
            v = e[k]
            lines.append(f'{k} = {v!r}\n'.replace("'", '"'))
    lines.append("\n")
(out / "manifest.toml").write_text("".join(lines))
PY

echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; ONNX Runtime $lib"
echo "== 1. per model (fusiond-bench models), tract's rows also with the kernels capped at AVX2 (a mini-PC's N100 set)"
"$bin" models --models "$shared/models" --models "$work/int8" --models "$work/swapper" --models "$work/ortfmt" \
    --ort-library "$lib" --runs "$runs" --cpu-tiers avx2 --json "$work/models.json"

echo "== 2. full pipeline per 640x480 frame (fusiond-bench live part 1, then the reference)"
frames=(--two "$shared/camera/two_people_pan/frame_001.jpg" --one "$shared/images/fr_obama.jpg"
    --source "$shared/images/fr_biden.jpg")
# fusiond fits its detector to the 640x480 frame (pipeline.fit_detector);
# `ort-box` runs it again at the reference's 640x640 letterbox, to show what
# the fit alone changes.
for run in tract ort ort-box; do
    size=()
    [ "$run" = ort-box ] && size=(--size 640x640)
    "$bin" live --models "$shared/models" --models "$work/contract" --detector yunet_2023mar "${size[@]}" \
        --swapper identity_swapper "${frames[@]}" --runs "$runs" --seconds 0 \
        --engine "${run%-box}" --ort-library "$lib" --json "$work/live-$run.json"
done
"$py" benches/reference_pipeline.py --models "$shared/models" --models "$work/contract" --detector yunet_2023mar \
    --swapper identity_swapper "${frames[@]}" --runs "$runs" --json "$work/reference.json" 2>/dev/null
echo "-- side by side (median ms, swap mode)"
"$py" benches/report.py pipeline "$work/live-tract.json" "$work/live-ort.json" "$work/reference.json" \
    "$work/live-ort-box.json"

echo "== 3. roofline of the inswapper-size swap"
clock=$("$bin" clock)
echo "  $clock"
BENCH_CLOCK_MHZ=$(echo "$clock" | grep -o '^clock: [0-9]*' | cut -d' ' -f2) \
    "$py" benches/report.py roofline "$work/models.json" "$(cat "$work/swapper/gflop")" inswapper_bench

echo "== 4. JPEG encoding: fusiond (libjpeg-turbo), jpeg-encoder and OpenCV in turns (BENCHMARKS.md section 8)"
"$bin" jpeg --python "$py" --image "$shared/camera/two_people_pan/frame_001.jpg" --image "$shared/images/fr_obama.jpg" \
    --quality 80 --json "$work/jpeg.json"
