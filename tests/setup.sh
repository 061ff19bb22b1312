#!/usr/bin/env bash
# Installs everything fusiond's build, demo and tests need on a fresh Debian 12
# machine (as root), and exports where things live. Idempotent and quick when
# everything is already there. Source it (`. tests/setup.sh`) to keep the
# exported variables, or run it on its own.
#
#   CARGO_TARGET_DIR   default ~/.cache/fusiond-target (outside the clone, so
#                      fresh clones on the same machine reuse the build)
#   FUSIOND_VENV       default ~/.cache/fusiond-venv (Python test tools)
#   FUSIOND_PYTHON     that venv's python
set -euo pipefail

APT_PACKAGES=(pkg-config libclang-dev libsystemd-dev systemd mosquitto mosquitto-clients openssl python3-venv ca-certificates
    ffmpeg prometheus curl chromium chromium-driver gcc g++ lintian help2man dpkg-dev file cmake nasm)

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing apt packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if command -v rustup >/dev/null; then
    rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/fusiond-target}"
export FUSIOND_VENV="${FUSIOND_VENV:-$HOME/.cache/fusiond-venv}"
export FUSIOND_PYTHON="$FUSIOND_VENV/bin/python"
mkdir -p "$CARGO_TARGET_DIR"

requirements="$(dirname "${BASH_SOURCE[0]}")/python/requirements.txt"
stamp="$FUSIOND_VENV/.requirements"
if [ ! -x "$FUSIOND_PYTHON" ] || ! cmp -s "$requirements" "$stamp"; then
    echo "setup: creating Python venv in $FUSIOND_VENV"
    python3 -m venv "$FUSIOND_VENV"
    "$FUSIOND_PYTHON" -m pip install -q --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$stamp"
fi
echo "setup: ok (target dir $CARGO_TARGET_DIR, venv $FUSIOND_VENV)"
