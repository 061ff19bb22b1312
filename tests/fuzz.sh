#!/usr/bin/env bash
# Runs every cargo-fuzz target (tests/fuzz) for SECONDS each, from seed
# corpora built out of the real files in ../shared and the repository, and
# prints one line per target: executions, executions per second, coverage
# (libFuzzer's cov and ft) and corpus size. A crash fails the run and names
# the input, saved under $CARGO_TARGET_DIR/fuzz/artifacts/<target>/.
#
#   tests/fuzz.sh [SECONDS] [TARGET...]     (default 20 s, every target)
#
# Installs the nightly toolchain (cargo-fuzz only; everything else builds
# on stable) and cargo-fuzz when missing. The corpora grow in
# $CARGO_TARGET_DIR/fuzz/corpus between runs, outside the clone.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/setup.sh >/dev/null
seconds="${1:-20}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(command config manifest bank source_image frame http)
shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
[ -d "$shared/images" ] || { echo "error: $shared/images is missing; set FUSIOND_SHARED to the shared/ folder" >&2; exit 1; }

# The nightly is pinned, so a run today and one next month build the same
# fuzzers (cargo-fuzz needs -Zsanitizer); FUZZ_TOOLCHAIN moves it.
toolchain="${FUZZ_TOOLCHAIN:-nightly-2026-05-20}"
rustup toolchain list | grep -q "^$toolchain" || rustup toolchain install "$toolchain" --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2 --locked

fuzz="$CARGO_TARGET_DIR/fuzz"
mkdir -p "$fuzz/corpus" "$fuzz/artifacts"
"$FUSIOND_PYTHON" tests/fuzz/seeds.py "$shared" "$fuzz/corpus"
echo "== cargo +$toolchain fuzz build (no engines: fusiond without default features)"
cargo +"$toolchain" fuzz build --fuzz-dir tests/fuzz --debug-assertions >/dev/null 2>"$fuzz/build.log" ||
    { cat "$fuzz/build.log"; exit 1; }

failed=0
for t in "${targets[@]}"; do
    mkdir -p "$fuzz/artifacts/$t"
    log="$fuzz/$t.log"
    if cargo +"$toolchain" fuzz run --fuzz-dir tests/fuzz --debug-assertions "$t" "$fuzz/corpus/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$fuzz/artifacts/$t/" >"$log" 2>&1; then
        runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)"
        rate="$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)"
        last="$(grep -E '^#[0-9]+' "$log" | tail -n 1)"
        cov="$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo '?')"
        ft="$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo '?')"
        corp="$(grep -o 'corp: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo '?')"
        echo "fuzz: $t: $runs runs in ${seconds}s ($rate/s), cov $cov, ft $ft, corpus $corp"
        if [ "${runs:-0}" -eq 0 ]; then
            failed=1
            echo "fuzz: $t: FAILED: no input ran (log: $log)"
        fi
    else
        failed=1
        echo "fuzz: $t: FAILED; the input is in $fuzz/artifacts/$t/:"
        grep -E 'panicked|ERROR: libFuzzer|SUMMARY|artifact_prefix|Test unit written' "$log" | head -n 8 | sed 's/^/   /'
    fi
done
exit $failed
