#!/usr/bin/env bash
# The GPU check: one prepared script for a machine with an NVIDIA GPU and no
# network. It installs nothing. Within 8 minutes it
#   1. probes: nvidia-smi, the driver and the CUDA, cuBLAS, cuDNN and
#      TensorRT libraries, and every ONNX Runtime library or Python package
#      with GPU providers;
#   2. with an ONNX Runtime that has the CUDA provider: runs each model
#      (YuNet, SCRFD, ArcFace from ../shared, and the inswapper-size swapper
#      that models/make_bench_swapper.py writes) on tract, on ONNX Runtime's
#      CPU provider and on CUDA and TensorRT, FP32 and FP16, in the same run,
#      each start a fresh process started twice (the second start shows the
#      engine caches), checks their outputs against tract's
#      (fusiond::infer::agreement bounds), then a 640x480 frame end to end
#      with the swap, one face and four (fusiond-bench gpu-frames);
#   3. with only the driver: says what is missing and measures the CPU rows;
#   4. on a machine with no GPU: prints "no GPU" with the probe's findings
#      and exits 0.
# The report is JSON in $OUT (gpu-check.json, with each step's own JSON
# beside it) and a summary on stdout. A step that runs past its budget is
# stopped, named on stdout and in the report, and the script exits 1.
#
# Inputs (environment): FUSIOND_BIN and FUSIOND_BENCH (default: the device
# profile's builds in $CARGO_TARGET_DIR, `cargo build --profile device
# --features ort --bin fusiond --bench fusiond-bench`), FUSIOND_SHARED
# (../shared), GPU_ORT_LIBRARY (a libonnxruntime.so with the GPU providers
# beside it; default: the first such library found), OUT (default: a new
# temporary folder, printed).
#
# Budgets (seconds, 480 in all): probe 20, swapper model 60, the shared
# models 110, the swapper 180, each frame row 60.
set -uo pipefail
cd "$(dirname "$0")/../.."
start=$SECONDS
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
target="${CARGO_TARGET_DIR:-$HOME/.cache/fusiond-target}"
bin="${FUSIOND_BIN:-$target/device/fusiond}"
bench="${FUSIOND_BENCH:-$(ls -t "$target"/device/deps/fusiond_bench-* 2>/dev/null | grep -v '\.d$' | head -1)}"
py="$(command -v python3 || true)"
timed_out=()
failed=()
say() { echo "gpu-check: $*"; }

# Runs "$@" for at most $1 seconds; a time cut or a failure is recorded.
step() {
    local name="$1" budget="$2"
    shift 2
    say "$name (budget ${budget} s)"
    timeout --kill-after=5 "$budget" "$@"
    local rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        say "STEP TIMED OUT: $name ran past its ${budget} s budget"
        timed_out+=("$name")
    elif [ "$rc" -ne 0 ]; then
        say "step failed: $name (exit $rc)"
        failed+=("$name")
    fi
    return "$rc"
}

# ---- 1. probe
dirs=(/usr/lib /usr/lib64 /usr/local /opt)
if [ -n "$py" ]; then
    while read -r d; do [ -d "$d" ] && dirs+=("$d"); done < <("$py" -c 'import site, sys; print("\n".join(site.getsitepackages()))' 2>/dev/null)
fi
[ -n "${GPU_ORT_LIBRARY:-}" ] && dirs+=("$(dirname "$GPU_ORT_LIBRARY")")
timeout 20 find "${dirs[@]}" -maxdepth 9 \( -type f -o -type l \) \( -name 'libcuda.so*' -o -name 'libcudart.so*' \
    -o -name 'libcublas.so*' -o -name 'libcublasLt.so*' -o -name 'libcudnn.so*' -o -name 'libcufft.so*' \
    -o -name 'libcurand.so*' -o -name 'libnvrtc.so*' -o -name 'libnvJitLink.so*' -o -name 'libnvinfer.so*' \
    -o -name 'libnvinfer_plugin.so*' -o -name 'libonnxruntime.so*' -o -name 'libonnxruntime_providers_*.so' \) \
    2>/dev/null | sort -u >"$work/libs"
smi="$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1)"
smi_ok=$?
pyort="$([ -n "$py" ] && "$py" -c 'import onnxruntime as o; print(o.__version__, *o.get_available_providers())' 2>&1 | tail -1)"
has() { grep -q "/$1" "$work/libs"; }
missing=()
for lib in libcuda.so libcudart.so libcublas.so libcudnn.so libnvinfer.so; do has "$lib" || missing+=("$lib"); done
gpu_ort="${GPU_ORT_LIBRARY:-}"
if [ -z "$gpu_ort" ]; then
    while read -r f; do
        [ -e "$(dirname "$f")/libonnxruntime_providers_cuda.so" ] && { gpu_ort="$f"; break; }
    done < <(grep '/libonnxruntime\.so' "$work/libs")
fi
cpu_ort="$(grep '/libonnxruntime\.so\.' "$work/libs" | head -1)"

# The folders of the GPU libraries, for the loader.
ld=""
for d in $(grep -E '/lib(cudart|cublas|cublasLt|cudnn|cufft|curand|nvrtc|nvJitLink|nvinfer)\.so' "$work/libs" | xargs -r -n1 dirname | sort -u); do
    ld="$ld:$d"
done
[ -n "$gpu_ort" ] && ld="$(dirname "$gpu_ort")$ld"
export LD_LIBRARY_PATH="${ld#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unresolved=""
if [ -n "$gpu_ort" ]; then
    for p in "$(dirname "$gpu_ort")"/libonnxruntime_providers_{cuda,tensorrt}.so; do
        [ -e "$p" ] && unresolved+="$(ldd "$p" 2>/dev/null | awk -v p="$(basename "$p")" '/not found/ {print p ": " $1}')"$'\n'
    done
fi

report() {
    "$py" - "$out" "$work/libs" "$@" <<'EOF'
import json, os, sys
out, libs = sys.argv[1], sys.argv[2]
env = lambda k: os.environ.get(k, "")
doc = {
    "gpu": env("R_GPU") == "1",
    "nvidia_smi": env("R_SMI"),
    "libraries": open(libs).read().split(),
    "missing": env("R_MISSING").split(),
    "unresolved": [l for l in env("R_UNRESOLVED").splitlines() if l.strip()],
    "gpu_onnxruntime": env("R_GPU_ORT") or None,
    "python_onnxruntime": env("R_PYORT") or None,
    "timed_out": env("R_TIMED_OUT").split(),
    "failed": env("R_FAILED").split(),
    "seconds": int(env("R_SECONDS") or 0),
}
for name in ("models", "swapper", "frames-cuda", "frames-tensorrt"):
    path = os.path.join(out, name + ".json")
    if os.path.exists(path):
        doc[name] = json.load(open(path))
json.dump(doc, open(os.path.join(out, "gpu-check.json"), "w"), indent=1)
EOF
}
export_report() {
    export R_SMI="$smi" R_MISSING="${missing[*]}" R_UNRESOLVED="$unresolved" R_GPU_ORT="$gpu_ort" R_PYORT="$pyort"
    export R_TIMED_OUT="${timed_out[*]}" R_FAILED="${failed[*]}" R_SECONDS="$((SECONDS - start))"
}

say "nvidia-smi: $smi"
say "libraries found: $(wc -l <"$work/libs"); missing: ${missing[*]:-none}"
say "ONNX Runtime with GPU providers: ${gpu_ort:-none}; Python onnxruntime: ${pyort:-none}"
[ -n "${unresolved//$'\n'/}" ] && say "unresolved by the loader: $(echo $unresolved)"
if [ "$smi_ok" -ne 0 ] || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "no GPU: nvidia-smi found no device; nothing to measure on a GPU here"
    export_report
    R_GPU=0 report && say "report: $out/gpu-check.json"
    exit 0
fi
[ -x "$bin" ] && [ -x "$bench" ] || { say "error: fusiond ($bin) or fusiond-bench ($bench) is missing; build them first (see the top of this file)"; exit 1; }
[ -d "$shared/models" ] || { say "error: $shared/models is missing; set FUSIOND_SHARED"; exit 1; }

# ---- 2. the models
img="$shared/images"
lib="${gpu_ort:-$cpu_ort}"
rows="ort-cpu,cuda,cuda-fallback,tensorrt,tensorrt-fp16"
if [ -z "$gpu_ort" ]; then
    say "only the driver is there: no ONNX Runtime with the CUDA provider (libonnxruntime_providers_cuda.so); measuring the CPU rows"
    rows="$([ -n "$cpu_ort" ] && echo ort-cpu)"
fi
has libnvinfer.so || say "no TensorRT libraries (libnvinfer.so): the TensorRT rows fail at registration, which they report"
export FUSIOND_CACHE_DIR="$work/cache"
common=(--photo "$img/fr_obama.jpg" --trt-cache "$work/trt")
[ -n "$lib" ] && common+=(--ort-library "$lib")
step "models on each provider" 110 "$bench" gpu-models --models "$shared/models" --model yunet_2023mar \
    --model scrfd_500m --model arcface_fr --rows "$rows" --runs 50 --cpu-threads 4 "${common[@]}" --json "$out/models.json"
swapper_ok=0
if [ -n "$py" ] && "$py" -c 'import numpy, onnx' 2>/dev/null; then
    step "swapper-size model (models/make_bench_swapper.py)" 60 "$py" models/make_bench_swapper.py "$work/bench" && swapper_ok=1
else
    say "no swapper-size model: python3 with numpy and onnx is needed for models/make_bench_swapper.py"
fi
if [ "$swapper_ok" = 1 ] && [ -f "$work/bench/inswapper_bench_128.onnx" ]; then
    step "the swapper on each provider" 180 "$bench" gpu-models --models "$work/bench" --model inswapper_bench \
        --rows "${rows/cuda-fallback,/}" --runs 30 --cpu-runs 1 --cpu-threads 8 "${common[@]}" --json "$out/swapper.json"
    # ---- the frame, end to end
    frame=(--models "$shared/models" --models "$work/bench" --detector yunet_2023mar --recognizer arcface_fr
        --swapper inswapper_bench --one "$img/fr_obama.jpg" --four "$img/fr_obama.jpg" "$img/fr_biden.jpg"
        "$img/fr_obama2.jpg" "$img/pexels-sam-lion-5709614.jpg" --source "$img/fr_biden.jpg" --runs 100
        --engine ort --ort-library "$lib" --trt-cache "$work/trt")
    if [ -n "$gpu_ort" ]; then
        step "frame on CUDA" 60 "$bench" gpu-frames "${frame[@]}" --ort-providers cuda --json "$out/frames-cuda.json"
        if has libnvinfer.so; then
            step "frame on TensorRT FP16" 60 "$bench" gpu-frames "${frame[@]}" --ort-providers tensorrt,cuda --trt-fp16 \
                --json "$out/frames-tensorrt.json"
        fi
    fi
fi

# ---- 4. the report
export_report
R_GPU=1 report
"$py" - "$out/gpu-check.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("== GPU check summary")
print("GPU:", d["nvidia_smi"], "| ONNX Runtime:", d["gpu_onnxruntime"] or "no GPU build", "| missing:", " ".join(d["missing"]) or "none")
for part in ("models", "swapper"):
    for r in d.get(part, []):
        print(f"  {r['model']:<16} {r['row']:<13} #{r['start']} load {r['load_ms']:8.1f} ms  median {r['median_ms']:8.3f} ms  {r.get('agreement') or 'reference'}  {r.get('proven_on') or ''}")
for name in ("frames-cuda", "frames-tensorrt"):
    f = d.get(name)
    if not f:
        continue
    one, four = f["rows"]
    print(f"  {name}: 1 face {one['e2e']:.2f} ms ({one['fps']:.1f} fps, cpu-side {one['cpu_side']:.2f} ms), 4 faces {four['e2e']:.2f} ms ({f['four_over_one']:.2f}x)")
    print(f"    goals: >= 60 fps {'met' if one['fps'] >= 60 else 'NOT met'}; 4 faces <= 2x {'met' if f['four_over_one'] <= 2 else 'NOT met'}; cpu-side < 8 ms {'met' if one['cpu_side'] < 8 and four['cpu_side'] < 8 else 'NOT met'}")
print("timed out:", " ".join(d["timed_out"]) or "nothing", "| failed:", " ".join(d["failed"]) or "nothing", f"| {d['seconds']} s")
EOF
say "report: $out/gpu-check.json"
[ ${#timed_out[@]} -eq 0 ] && [ ${#failed[@]} -eq 0 ]
