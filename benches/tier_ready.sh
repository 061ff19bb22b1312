#!/usr/bin/env bash
# When a tier is ready: `fusiond load --tier` does what the daemon does
# before READY=1 (map, parse, optimise, plan and warm each model of the
# tier, no hash check), for an FP32 tier and its INT8 twin on tract, in
# turns, each once cold (the page cache dropped first, as after a reboot;
# needs root) and once warm (the files cached, as after a restart). The
# tiers are SCRFD, ArcFace and the inswapper-size swapper; the INT8 swapper
# reads its emap from the FP32 twin's graph once, then from the cache that
# a first uncounted load of each tier fills.
#
#   benches/tier_ready.sh FUSIOND_BIN INT8_DIR BENCH_DIR [ROUNDS] [THREADS]
#
# INT8_DIR: `models/quantize --out` (the shared models' INT8 twins);
# BENCH_DIR: `models/make_bench_swapper.py --int8` (both swappers).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: benches/tier_ready.sh FUSIOND_BIN INT8_DIR BENCH_DIR [ROUNDS] [THREADS]" >&2; exit 2; }
bin=$1 int8=$2 bench=$3 rounds=${4:-3} threads=${5:-1}
shared="${FUSIOND_SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared}"
for f in "$shared/models/scrfd_500m_bnkps.onnx" "$int8/manifest.toml" "$bench/inswapper_bench_128_int8.onnx"; do
    [ -e "$f" ] || { echo "error: $f is missing (see the usage in $0)" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat >"$work/fusiond.toml" <<TOML
[models]
dirs = ["$shared/models", "$int8", "$bench"]
start_tier = "fp32"

[[tier]]
name = "fp32"
models = ["scrfd_500m", "arcface_fr", "inswapper_bench"]

[[tier]]
name = "int8"
models = ["scrfd_500m_int8", "arcface_fr_int8", "inswapper_bench_int8"]

[pipeline]
state_dir = "$work/state"

[inference]
engine = "tract"
tract_threads = $threads
TOML
# One tier's report: when it was ready, then each model's phases.
load() {
    "$bin" load --config "$work/fusiond.toml" --tier "$1" --json 2>"$work/log" |
        python3 -c 'import json, sys
r = json.load(sys.stdin)
ms = lambda d: d["secs"] * 1e3 + d["nanos"] / 1e6
parts = ["ready %.0f ms" % (r["ready_s"] * 1e3)]
for m in r["models"]:
    t = m["timings"]
    load = sum(ms(t[k]) for k in ("map", "parse", "optimize", "plan"))
    parts.append("%s load %.0f + warm-up %.0f" % (m["name"], load, ms(t["warmup"])))
print(", ".join(parts))'
}
echo "tract, $threads thread(s); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
load fp32 >/dev/null || { tail -3 "$work/log" >&2; exit 1; }
load int8 >/dev/null || { tail -3 "$work/log" >&2; exit 1; }
for r in $(seq "$rounds"); do
    for tier in fp32 int8; do
        sync
        echo 3 >/proc/sys/vm/drop_caches
        cold=$(load "$tier") || { tail -3 "$work/log" >&2; exit 1; }
        warm=$(load "$tier") || { tail -3 "$work/log" >&2; exit 1; }
        printf 'round %s %s cold: %s\nround %s %s warm: %s\n' "$r" "$tier" "$cold" "$r" "$tier" "$warm"
    done
done
