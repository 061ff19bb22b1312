#!/usr/bin/env bash
# README's first command: sets up, builds fusiond (release) and runs the face
# core end to end on the bundled data in ../shared: detection with a debug
# picture, a swap with a contract swapper, and the per-stage benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/setup.sh

shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
out="${FUSIOND_OUT:-/tmp/fusiond-demo}"
[ -d "$shared/models" ] || { echo "error: $shared/models is missing; set FUSIOND_SHARED to the shared/ folder" >&2; exit 1; }
mkdir -p "$out"

cargo build --release --quiet
bin="$CARGO_TARGET_DIR/release/fusiond"
"$FUSIOND_PYTHON" models/make_contract_models.py "$out/models" >/dev/null

echo "== fusiond detect (boxes and landmarks drawn into $out/detect_*.png)"
"$bin" detect "$shared"/images/*.jpg "$shared"/images/*.png --models "$shared/models" --debug "$out/detect.png"
echo "== fusiond swap (latent_color_swapper: the source identity tints the swapped faces)"
"$bin" swap --source "$shared/images/fr_biden.jpg" --target "$shared/images/fr_obama_and_biden.jpg" \
    --output "$out/swap.jpg" --models "$shared/models" --models "$out/models" \
    --swapper latent_color_swapper --selector many
echo "== fusiond bench"
"$bin" bench --image "$shared/images/fr_two_people.jpg" --source "$shared/images/fr_biden.jpg" \
    --models "$shared/models" --models "$out/models" --swapper identity_swapper --runs 10
echo "demo: outputs in $out"
