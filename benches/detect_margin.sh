#!/usr/bin/env bash
# `fusiond detect` on many photos against the Python + onnxruntime
# reference doing the same work (benches/detect_reference.py), both at one
# thread, on the 640x480 frames of ../shared/camera/two_people_pan: the
# marginal cost of 60 more frames, (time of 80 - time of 20) / 60, so that
# start-up and model loading drop out. Three rounds, interleaved; the
# medians and their ratio are printed.
#
#   benches/detect_margin.sh [DETECTOR]      (default yunet_2023mar)
#
# FUSIOND_BIN: the binary to time (default: the release build).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/setup.sh >/dev/null
detector="${1:-yunet_2023mar}"
shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
bin="${FUSIOND_BIN:-$CARGO_TARGET_DIR/release/fusiond}"
[ -x "$bin" ] || { echo "error: $bin is missing: cargo build --release, or set FUSIOND_BIN" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
frames=("$shared"/camera/two_people_pan/*.jpg)
((${#frames[@]} >= 40)) || { echo "error: $shared/camera/two_people_pan has ${#frames[@]} frames" >&2; exit 1; }
for i in $(seq 0 79); do
    cp "${frames[i % ${#frames[@]}]}" "$work/$(printf 'f%02d.jpg' "$i")"
done
mapfile -t all < <(ls "$work"/f*.jpg)
seconds() { local s=$EPOCHREALTIME; "$@" >/dev/null; awk -v a="$s" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }'; }
declare -a f20 f80 p20 p80
for round in 1 2 3; do
    f20+=("$(seconds "$bin" detect --threads 1 --models "$shared/models" --detector "$detector" --json "${all[@]:0:20}")")
    p20+=("$(seconds "$FUSIOND_PYTHON" benches/detect_reference.py --models "$shared/models" --detector "$detector" "${all[@]:0:20}")")
    f80+=("$(seconds "$bin" detect --threads 1 --models "$shared/models" --detector "$detector" --json "${all[@]}")")
    p80+=("$(seconds "$FUSIOND_PYTHON" benches/detect_reference.py --models "$shared/models" --detector "$detector" "${all[@]}")")
done
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
margin() { awk -v a="$1" -v b="$2" 'BEGIN { print (b - a) * 1000 / 60 }'; }
f=$(margin "$(median "${f20[@]}")" "$(median "${f80[@]}")")
p=$(margin "$(median "${p20[@]}")" "$(median "${p80[@]}")")
printf 'detect margin (%s, 1 thread, 640x480): fusiond %.2f ms a frame, reference %.2f ms, ratio %.2fx (goal <= 1.00)\n' \
    "$detector" "$f" "$p" "$(awk -v a="$f" -v b="$p" 'BEGIN { print a / b }')"
printf '  medians: fusiond 20 frames %.3f s, 80 frames %.3f s; reference %.3f s, %.3f s\n' \
    "$(median "${f20[@]}")" "$(median "${f80[@]}")" "$(median "${p20[@]}")" "$(median "${p80[@]}")"
