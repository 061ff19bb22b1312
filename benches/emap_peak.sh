#!/usr/bin/env bash
# Peak memory of a one-shot `fusiond swap` on a big swapper the first time
# (the emap read out of the graph and cached) against the next time (the
# emap read from the cache), in turns: each round starts with an empty
# cache folder (FUSIOND_CACHE_DIR). Goal: first run <= 1.05x the cached
# run's peak RSS.
#
#   benches/emap_peak.sh BENCH_DIR [ROUNDS]
#
# BENCH_DIR holds models/make_bench_swapper.py's inswapper_bench (554 MB,
# its SHA-256 in the manifest, so that its emap is cached); FUSIOND_BIN is
# the binary (default: the release build).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: benches/emap_peak.sh BENCH_DIR [ROUNDS]" >&2; exit 2; }
bench=$1 rounds=${2:-3}
bin="${FUSIOND_BIN:-${CARGO_TARGET_DIR:-target}/release/fusiond}"
shared="${FUSIOND_SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared}"
[ -f "$bench/inswapper_bench_128.onnx" ] || { echo "error: $bench/inswapper_bench_128.onnx is missing; run models/make_bench_swapper.py $bench" >&2; exit 1; }
[ -x "$bin" ] || { echo "error: $bin is missing: cargo build --release, or set FUSIOND_BIN" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
peak() {
    FUSIOND_CACHE_DIR="$1" /usr/bin/time -f "%M" "$bin" swap --models "$shared/models" --models "$bench" \
        --swapper inswapper_bench --threads 2 --selector many --source "$shared/images/fr_biden.jpg" \
        --target "$shared/images/fr_two_people.jpg" --output "$out/out.jpg" 2>&1 >/dev/null | tail -n 1
}
echo "file: $(stat -c %s "$bench/inswapper_bench_128.onnx") bytes"
declare -a first cached
for r in $(seq "$rounds"); do
    cache="$out/cache-$r"
    mkdir -p "$cache"
    first+=("$(peak "$cache")")
    ls "$cache"/emap-*.safetensors >/dev/null 2>&1 || { echo "error: round $r cached no emap in $cache" >&2; exit 1; }
    cached+=("$(peak "$cache")")
    echo "round $r: first run peak ${first[-1]} KiB, cached run ${cached[-1]} KiB"
done
median() { printf '%s\n' "$@" | sort -n | sed -n "$(((${#@} + 1) / 2))p"; }
f=$(median "${first[@]}") c=$(median "${cached[@]}")
awk -v f="$f" -v c="$c" 'BEGIN { printf "emap peak: first run %.1f MB, cached run %.1f MB, ratio %.3fx (goal <= 1.05)\n", f / 1024, c / 1024, f / c }'
