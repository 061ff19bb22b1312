#!/usr/bin/env bash
# Peak memory of a one-shot `fusiond swap` on a big swapper, two binaries in
# turns (the machine's drift hits both alike): peak RSS and wall time from
# /usr/bin/time, and the swapper's load phases from `fusiond -v`.
#
#   benches/swap_memory.sh BEFORE AFTER BENCH_DIR [ROUNDS]
#
# BENCH_DIR holds the swapper that `models/make_bench_swapper.py BENCH_DIR`
# writes (inswapper_bench, 554 MB); the detector and the recogniser come from
# ../shared/models (or FUSIOND_SHARED). The first run of each binary reads
# the emap out of the graph and caches it, so a warm-up run of BEFORE comes
# first and is not counted.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: benches/swap_memory.sh BEFORE AFTER BENCH_DIR [ROUNDS]" >&2; exit 2; }
before=$1 after=$2 bench=$3 rounds=${4:-3}
shared="${FUSIOND_SHARED:-$(cd "$(dirname "$0")/../.." && pwd)/shared}"
[ -f "$bench/inswapper_bench_128.onnx" ] || { echo "error: $bench/inswapper_bench_128.onnx is missing; run models/make_bench_swapper.py $bench" >&2; exit 1; }
[ -d "$shared/models" ] || { echo "error: $shared/models is missing; set FUSIOND_SHARED to the shared/ folder" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
swap() {
    /usr/bin/time -f "peak %M KiB, wall %e s" "$1" swap --models "$shared/models" --models "$bench" \
        --swapper inswapper_bench --threads 2 --selector many --source "$shared/images/fr_biden.jpg" \
        --target "$shared/images/fr_two_people.jpg" --output "$out/out.jpg" -v 2>&1 |
        grep -E "^peak|model .inswapper_bench.: map" | sed 's/.*model .inswapper_bench.: /  load: /'
}
echo "file: $(stat -c %s "$bench/inswapper_bench_128.onnx") bytes"
swap "$before" >/dev/null
for r in $(seq "$rounds"); do
    for b in before after; do
        bin=$before
        [ $b = after ] && bin=$after
        echo "round $r $b: $(swap "$bin" | tac | tr '\n' ' ')"
    done
done
