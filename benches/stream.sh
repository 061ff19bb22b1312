#!/usr/bin/env bash
# The stream scorer over the shared clips and two pans: extracts each
# clip's first frames at 640x480 (../shared/video/README.md's recipe) and
# runs `fusiond-bench stream` on them with the daemon's default settings,
# built in the dev profile (dependencies optimised, as the tests' build):
# the figures are counts and ratios, not time.
#
#   benches/stream.sh [OUTDIR]     (default benches/results/stream-DATE)
#
# Environment: FUSIOND_SHARED (default ../shared), STREAM_FRAMES (300),
# FUSIOND_CONTRACT_MODELS (the contract swappers; made here when unset).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/setup.sh >/dev/null
shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
frames=${STREAM_FRAMES:-300}
out="${1:-benches/results/stream-$(date +%F)}"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
clips=(fourpeople-table.265:30 foreman-cif.mkv:30 franck-talking.mp4:24 hamilton-whitehouse.mp4:29.97)
args=()
for c in "${clips[@]}"; do
    clip=${c%%:*} fps=${c##*:}
    [ -f "$shared/video/$clip" ] || { echo "stream: $shared/video/$clip is missing (set FUSIOND_SHARED)" >&2; exit 1; }
    mkdir -p "$work/${clip%%.*}"
    ffmpeg -loglevel error -i "$shared/video/$clip" -frames:v "$frames" \
        -vf "scale=640:480:force_original_aspect_ratio=decrease,pad=640:480:(ow-iw)/2:(oh-ih)/2" \
        -q:v 2 "$work/${clip%%.*}/frame_%04d.jpg"
    args+=(--clip "$work/${clip%%.*}" --fps "$fps")
done
contract="${FUSIOND_CONTRACT_MODELS:-$work/contract}"
[ -f "$contract/manifest.toml" ] || "$FUSIOND_PYTHON" models/make_contract_models.py "$contract" >/dev/null
cargo bench --profile dev --bench fusiond-bench -- stream --models "$shared/models" --models "$contract" \
    --detector scrfd_500m --swapper identity_swapper --source "$shared/images/fr_biden.jpg" \
    "${args[@]}" --pan "$shared/images/fr_two_people.jpg" --pan "$shared/images/fr_obama_and_biden.jpg" \
    --frames "$frames" --json "$out/stream.json" | tee "$out/stream.txt"
