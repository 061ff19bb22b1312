#!/usr/bin/env bash
# Where tract's time goes on the shared models, against ONNX Runtime's own
# profiler on the same inputs, in one run: for each model, `fusiond profile
# --json` (every node of tract's plan timed) and benches/ort_profile.py
# (ONNX Runtime's per-node profile), then both by ONNX node as a Markdown
# table. The raw JSON stays beside the tables.
#
#   benches/profile.sh OUT_DIR [THREADS]     (FUSIOND_BIN: the fusiond binary,
#                                             default: the edge build for this machine)
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/setup.sh >/dev/null
out=${1:?usage: benches/profile.sh OUT_DIR [THREADS]}
threads=${2:-1}
shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
bin="${FUSIOND_BIN:-$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/fusiond}"
[ -x "$bin" ] || { echo "profile: no fusiond at $bin: run debian/build.sh amd64 or set FUSIOND_BIN" >&2; exit 1; }
mkdir -p "$out"
for model in yunet_2023mar scrfd_500m arcface_fr; do
    "$bin" profile "$model" --models "$shared/models" --threads "$threads" --runs 20 --json >"$out/$model.tract.json"
    file=$("$FUSIOND_PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["file"])' "$out/$model.tract.json")
    "$FUSIOND_PYTHON" benches/ort_profile.py "$file" --tract "$out/$model.tract.json" --threads "$threads" \
        --runs 20 --json >"$out/$model.ort.json"
    {
        echo "### $model, $threads thread(s)"
        echo
        "$FUSIOND_PYTHON" benches/ort_profile.py "$file" --tract "$out/$model.tract.json" --saved "$out/$model.ort.json" \
            --top 10
        echo
        echo "tract by operator:"
        echo
        "$FUSIOND_PYTHON" - "$out/$model.tract.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["profile"]
print("| tract op | nodes | ms | % |")
print("|---|---|---|---|")
for r in p["by_op"][:8]:
    print(f"| {r['name']} | {r['nodes']} | {r['ms']:.2f} | {r['percent']:.1f} |")
PY
        echo
    } >"$out/$model.md"
    cat "$out/$model.md"
done
