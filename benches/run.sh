#!/usr/bin/env bash
# The benchmark suite behind BENCHMARKS.md, in one run on one machine:
#   1. each model on tract and ONNX Runtime (CPU), FP32 and INT8 QDQ, 1 and 2 threads;
#   2. the full pipeline per 640x480 frame (1 and 2 faces) on each engine and in
#      the NumPy/OpenCV + onnxruntime reference FaceFusion users have;
#   3. the roofline of the inswapper-size swap.
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

cargo build --release --features ort --quiet
bin="$CARGO_TARGET_DIR/release/fusiond"
lib="$("$py" -c 'import glob, os, onnxruntime as o; print(sorted(glob.glob(os.path.join(os.path.dirname(o.__file__), "capi", "libonnxruntime.so.*")))[-1])')"
[ -f "$work/int8/manifest.toml" ] ||
    "$py" models/quantize --models "$shared/models" --photos "$shared/images" --out "$work/int8" >/dev/null
[ -f "$work/contract/manifest.toml" ] || "$py" models/make_contract_models.py "$work/contract" >/dev/null
[ -f "$work/swapper/gflop" ] || {
    "$py" models/make_bench_swapper.py --int8 "$work/swapper" 2>/dev/null | tee "$work/swapper/log"
    grep -o '[0-9.]* GFLOP per swap' "$work/swapper/log" | cut -d' ' -f1 >"$work/swapper/gflop"
}

echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; ONNX Runtime $lib"
echo "== 1. per model (fusiond bench-models)"
"$bin" bench-models --models "$shared/models" --models "$work/int8" --models "$work/swapper" \
    --ort-library "$lib" --runs "$runs" --json "$work/models.json"

echo "== 2. full pipeline per 640x480 frame (fusiond bench-live part 1, then the reference)"
frames=(--two "$shared/camera/two_people_pan/frame_001.jpg" --one "$shared/images/fr_obama.jpg"
    --source "$shared/images/fr_biden.jpg")
for engine in tract ort; do
    "$bin" bench-live --models "$shared/models" --models "$work/contract" --detector yunet_2023mar \
        --swapper identity_swapper "${frames[@]}" --runs "$runs" --seconds 0 \
        --engine "$engine" --ort-library "$lib" --json "$work/live-$engine.json"
done
"$py" benches/reference_pipeline.py --models "$shared/models" --models "$work/contract" --detector yunet_2023mar \
    --swapper identity_swapper "${frames[@]}" --runs "$runs" --json "$work/reference.json" 2>/dev/null
echo "-- side by side (median ms, swap mode)"
"$py" benches/report.py pipeline "$work/live-tract.json" "$work/live-ort.json" "$work/reference.json"

echo "== 3. roofline of the inswapper-size swap"
"$py" benches/report.py roofline "$work/models.json" "$(cat "$work/swapper/gflop")" inswapper_bench
