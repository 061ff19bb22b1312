#!/usr/bin/env bash
# Where tract's time goes on the shared models, with fusiond's ops and with
# tract's own, against ONNX Runtime's own profiler on the same inputs, in one
# run: ROUNDS rounds, each running for every model `fusiond profile --json`
# (every node of tract's plan timed, and the load time), the same with
# --tract-stock-ops, and benches/ort_profile.py (ONNX Runtime's per-node
# profile and session creation), one after the other so that all three see
# the same drift of the machine; then
# benches/profile_summary.py prints the Markdown tables. The raw JSON stays
# in OUT_DIR beside summary.md. Each shared model's INT8 QDQ twin
# (models/quantize, written into OUT_DIR/int8 once) is profiled the same
# way, so that INT8 and FP32 are compared within the run.
#
#   benches/profile.sh OUT_DIR [THREADS] [ROUNDS]   (FUSIOND_BIN: the fusiond binary,
#                                                    default: the edge build for this machine)
#
# PROFILE_MODELS names other models instead (every one profiled as named,
# INT8 twins included, nothing quantised), found in PROFILE_MODEL_DIR, and
# PROFILE_RUNS sets the profiled runs per round (default 20): for the
# inswapper-size swapper (models/make_bench_swapper.py --int8 DIR),
#   PROFILE_MODELS="inswapper_bench inswapper_bench_int8" PROFILE_MODEL_DIR=DIR PROFILE_RUNS=2 \
#       benches/profile.sh OUT_DIR 1 2
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/setup.sh >/dev/null
out=${1:?usage: benches/profile.sh OUT_DIR [THREADS] [ROUNDS]}
threads=${2:-1}
rounds=${3:-5}
shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
bin="${FUSIOND_BIN:-$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/fusiond}"
[ -x "$bin" ] || { echo "profile: no fusiond at $bin: run debian/build.sh amd64 or set FUSIOND_BIN" >&2; exit 1; }
mkdir -p "$out"
runs=${PROFILE_RUNS:-20}
if [ -n "${PROFILE_MODELS:-}" ]; then
    read -ra models <<<"$PROFILE_MODELS"
    dirs=(--models "${PROFILE_MODEL_DIR:?PROFILE_MODELS needs PROFILE_MODEL_DIR}")
else
    fp32=(yunet_2023mar scrfd_500m arcface_fr)
    models=("${fp32[@]}" "${fp32[@]/%/_int8}")
    dirs=(--models "$shared/models" --models "$out/int8")
    [ -f "$out/int8/manifest.toml" ] ||
        "$FUSIOND_PYTHON" models/quantize --models "$shared/models" --photos "$shared/images" --out "$out/int8" "${fp32[@]}" |
        grep "worst"
fi
# Rounds outside, models inside: a model and its INT8 twin see the same
# stretch of the machine's drift.
for round in $(seq "$rounds"); do
    for model in "${models[@]}"; do
        for kind in fused stock; do
            flag=()
            [ "$kind" = stock ] && flag=(--tract-stock-ops)
            "$bin" profile "$model" "${dirs[@]}" --threads "$threads" --runs "$runs" --json "${flag[@]}" \
                >"$out/$model.$kind.$round.json"
        done
        file=$("$FUSIOND_PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["file"])' "$out/$model.fused.1.json")
        "$FUSIOND_PYTHON" benches/ort_profile.py "$file" --tract "$out/$model.fused.1.json" --threads "$threads" \
            --runs "$runs" --json >"$out/$model.ort.$round.json"
    done
done
{
    echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores;" \
        "$("$bin" --version), onnxruntime $("$FUSIOND_PYTHON" -c 'import onnxruntime; print(onnxruntime.__version__)');" \
        "$threads thread(s), $rounds rounds of $runs profiled runs"
    echo
    "$FUSIOND_PYTHON" benches/profile_summary.py "$out" "${models[@]}"
} >"$out/summary.md"
cat "$out/summary.md"
