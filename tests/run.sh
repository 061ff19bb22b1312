#!/usr/bin/env bash
# The whole test suite: installs what it needs (tests/setup.sh), then runs
# format and lint checks, the Rust unit and integration tests on the real
# models and photos in ../shared, and the onnxruntime agreement tests.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/setup.sh

export FUSIOND_SHARED="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
if [ ! -d "$FUSIOND_SHARED/models" ]; then
    echo "error: the shared test data is missing: $FUSIOND_SHARED/models does not exist." >&2
    echo "       Put the project's shared/ folder beside the checkout or set FUSIOND_SHARED." >&2
    exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export FUSIOND_CONTRACT_MODELS="$work/contract-models"
echo "== contract models"
"$FUSIOND_PYTHON" models/make_contract_models.py "$FUSIOND_CONTRACT_MODELS"
export FUSIOND_INT8_MODELS="$work/int8-models"
echo "== INT8 models (models/quantize; INT8 vs FP32 on onnxruntime)"
"$FUSIOND_PYTHON" models/quantize --models "$FUSIOND_SHARED/models" --photos "$FUSIOND_SHARED/images" \
    --out "$FUSIOND_INT8_MODELS" 2>&1 | grep -E "worst|->"

# The ONNX Runtime engine's tests run against the wheel's own library.
FUSIOND_ORT_LIBRARY="$("$FUSIOND_PYTHON" -c 'import glob, os, onnxruntime as o; print(sorted(glob.glob(os.path.join(os.path.dirname(o.__file__), "capi", "libonnxruntime.so.*")))[-1])')"
export FUSIOND_ORT_LIBRARY

echo "== cargo fmt --check (the daemon, then the fuzz targets' own crate)"
cargo fmt --check
cargo fmt --check --manifest-path tests/fuzz/Cargo.toml
echo "== cargo clippy (default features, --features ort, and the library without engines as fuzzing builds it)"
cargo clippy --all-targets --quiet -- -D warnings
cargo clippy --all-targets --quiet --features ort -- -D warnings
cargo clippy --lib --quiet --no-default-features -- -D warnings
echo "== cargo test (tract only: no ONNX Runtime code in the binary)"
cargo test
echo "== cargo test --features ort (ONNX Runtime $FUSIOND_ORT_LIBRARY)"
cargo test --features ort
echo "== Yocto layer lint (oelint-adv, and a broken recipe it must reject)"
bash yocto/lint.sh
# The GPU check on this machine, which has no GPU: it must say so, with
# its probe's findings, and exit 0 (seconds; tests/gpu/check.sh).
echo "== GPU check without a GPU (tests/gpu/check.sh must say \"no GPU\")"
gpu_out="$work/gpu-check"
mkdir -p "$gpu_out"
OUT="$gpu_out" bash tests/gpu/check.sh | tee "$work/gpu-check.log"
grep -q "^no GPU" "$work/gpu-check.log" || { echo "error: tests/gpu/check.sh did not say \"no GPU\" here" >&2; exit 1; }
echo "== onnxruntime agreement (pytest)"
export FUSIOND_BIN="$CARGO_TARGET_DIR/debug/fusiond"
"$FUSIOND_PYTHON" -m pytest -q tests/python
# The amd64 package (the edge build against a bullseye sysroot; about 10 min
# after a change to fusiond, most of it the LTO link, 20 from a cold cache),
# lintian, its files, its glibc floor and a run on bullseye's glibc. The VM
# test installs it.
echo "== Debian package, amd64 (tests/deb/run.sh amd64)"
bash tests/deb/run.sh amd64
echo "== VM boot test (tests/vm/run.sh: bookworm guest, vivid, mosquitto, the package and its units, upgrade and removal)"
bash tests/vm/run.sh
# The soak's short version: the same faults and goals as tests/soak.sh 1h,
# in 2 minutes, on the dev build cargo test made.
echo "== soak under faults, 2 minutes (tests/soak.sh 2m)"
FUSIOND_BIN="$CARGO_TARGET_DIR/debug/fusiond" bash tests/soak.sh 2m
# Every fuzz target for 20 s (about 13 min more from a cold cache: nightly,
# cargo-fuzz and the sanitizer build of fusiond without its engines).
echo "== fuzzing, 20 s a target (tests/fuzz.sh 20)"
bash tests/fuzz.sh 20
# Cross builds (aarch64, armv7) tested under qemu-user, last, within what is
# left of CI's 90 minutes (87, for slack). armv7 builds and runs its unit
# tests; aarch64 runs its unit tests and every integration test that needs
# no camera and no VM (about 67 min emulated), or only the capture and CLI
# ones when less than 72 min are left. From an empty target directory the
# two test builds take about 21 min after 47 of native tests and VM (a fresh
# clone passed in 63 min, with the smaller aarch64 set); a build that still
# reaches the deadline says so, and the next run carries on from its cache.
echo "== cross builds under qemu-user (tests/cross/run.sh, until minute 87)"
export CROSS_DEADLINE=$(($(date +%s) + 87 * 60 - SECONDS))
# Each target's Debian package first (CROSS_STEPS deb: the edge build against
# bullseye, checked by tests/deb/run.sh), then its test build and tests.
CROSS_STEPS="deb build test" bash tests/cross/run.sh armv7
CROSS_STEPS="deb build test" CROSS_IT=all bash tests/cross/run.sh aarch64
