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
trap 'rm -rf "$work"; budgets' EXIT

# Every step has a budget in seconds: what it took on this project's
# 2-core CI machines with a warm cache after a change to fusiond, with a
# few percent to spare. They add up to at most 4500 s, the 75 minutes a warm
# run must fit (checked below). A cold cache takes longer.
# Steps that keep only one core busy run two at a time
# (vm_beside_arm_packages). The summary at the end prints each step's time
# against its budget, the budgets' sum, the steps over budget and what a
# deadline cut, so each log says where to cut. Every step after fuzzing
# (the packages, the VM, the ARM cost model, the cross tests) is bounded by
# CI's 90 minutes (CROSS_DEADLINE), so a cold cache costs what those steps
# could not finish, listed as skipped, and never the whole run; a second cut
# of a step in a row with the same cache fails the run.
timings=()
cuts=()
budgeted=0
step() {
    local budget=$1 name=$2 start=$SECONDS took
    shift 2
    budgeted=$((budgeted + budget))
    echo "== $name (budget $budget s)"
    "$@"
    took=$((SECONDS - start))
    timings+=("$(printf '%5d s / %4d s  %s%s' "$took" "$budget" "$name" "$( ((took > budget)) && echo '  OVER BUDGET')")")
}
budgets() {
    ((${#timings[@]})) || return 0
    echo "== step times against their budgets (total $((SECONDS / 60)) min, budgets $budgeted s; limit 4500 s, 75 min, with a warm cache)"
    printf '%s\n' "${timings[@]}"
    ((${#cuts[@]} == 0)) || printf 'SKIPPED (cut by the deadline): %s\n' "${cuts[@]}"
    if printf '%s\n' "${timings[@]}" | grep -q 'OVER BUDGET'; then
        echo "tests/run.sh: a step ran over its budget (above): make room before CI's 90 minutes run out" >&2
    fi
    if ((budgeted > 4500)); then
        echo "tests/run.sh: the budgets add up to $budgeted s, over the 4500 s a warm run must fit: make room" >&2
        exit 1
    fi
}

models() {
    export FUSIOND_CONTRACT_MODELS="$work/contract-models"
    "$FUSIOND_PYTHON" models/make_contract_models.py "$FUSIOND_CONTRACT_MODELS"
    export FUSIOND_INT8_MODELS="$work/int8-models"
    # INT8 vs FP32 on onnxruntime
    "$FUSIOND_PYTHON" models/quantize --models "$FUSIOND_SHARED/models" --photos "$FUSIOND_SHARED/images" \
        --out "$FUSIOND_INT8_MODELS" 2>&1 | grep -E "worst|->"
    # The ONNX Runtime engine's tests run against the wheel's own library.
    FUSIOND_ORT_LIBRARY="$("$FUSIOND_PYTHON" -c 'import glob, os, onnxruntime as o; print(sorted(glob.glob(os.path.join(os.path.dirname(o.__file__), "capi", "libonnxruntime.so.*")))[-1])')"
    export FUSIOND_ORT_LIBRARY
}
lint() {
    # The workspace (the daemon, crates/kernels, crates/tract-ops), then
    # the fuzz targets' own crate.
    cargo fmt --all --check
    cargo fmt --check --manifest-path tests/fuzz/Cargo.toml
    # Default features with C2PA (as the test build), --features ort, and
    # the library without engines as fuzzing builds it.
    cargo clippy --workspace --all-targets --quiet --features c2pa -- -D warnings
    cargo clippy --all-targets --quiet --features ort -- -D warnings
    cargo clippy --lib --quiet --no-default-features -- -D warnings
}
# The GPU check on this machine, which has no GPU: it must say so, with its
# probe's findings, and exit 0 (seconds; tests/gpu/check.sh).
gpu_check() {
    mkdir -p "$work/gpu-check"
    OUT="$work/gpu-check" bash tests/gpu/check.sh | tee "$work/gpu-check.log"
    grep -q "^no GPU" "$work/gpu-check.log" || { echo "error: tests/gpu/check.sh did not say \"no GPU\" here" >&2; exit 1; }
}
# The x86 kernels' lower tiers, forced on this CPU (FUSIOND_CPU, read by
# the one dispatch point crates/kernels/src/cpu.rs): the workspace's unit
# tests (the whole workspace, so that cargo resolves the features
# `cargo test --workspace --features c2pa` built with and builds tract no second time): the
# kernels' against their plain loops, the tract ops' against tract's own ops,
# and the fused ops against tract's own on the real models; the log names
# the tier each run used.
kernel_tiers() {
    local tier
    for tier in avx2 scalar; do
        FUSIOND_CPU=$tier cargo test --workspace --features c2pa --lib --quiet -- --nocapture 2>&1 |
            grep -E '^fusiond kernels|^test result|FAILED|^error'
        FUSIOND_CPU=$tier cargo test --features ort --test it --quiet tract_ops:: 2>&1 |
            grep -E '^test result|panicked|FAILED|^error'
    done
}
soak_stalled() {
    local out
    if out=$(SOAK_STALL=40 FUSIOND_BIN="$CARGO_TARGET_DIR/debug/fusiond" bash tests/soak.sh 90 2>&1); then
        echo "$out" | tail -n 20
        echo "tests/run.sh: the soak passed with its worker stalled: its goals do not see the pipeline" >&2
        return 1
    fi
    echo "$out" | grep -E "^soak: (FAILED|pipeline)" | sed 's/^/   /'
    echo "$out" | grep -q "frames_processed did not rise" ||
        { echo "$out" | tail -n 20; echo "tests/run.sh: the stalled soak failed, but not on the pipeline goal" >&2; return 1; }
}

pytests() {
    FUSIOND_BIN="$CARGO_TARGET_DIR/debug/fusiond" "$FUSIOND_PYTHON" -m pytest -q tests/python
}
# The ARM packages (tests/cross/run.sh's deb step: the edge build against
# bullseye, checked by tests/deb/run.sh), then the ARM cost model
# (benches/arm-cost.sh) on those very binaries, its quick form: stock tract
# and the default only, every model and the two-face frame on cortex-a76
# and on armv7's cortex-a7; it fails when the default executes more
# instructions than stock. cortex-a72 runs the same code as cortex-a76 for
# these two (neither uses FP16 nor the dot product) and counted within
# 0.2 % of it (landmark68's 9 M instructions within 3 %), so CI leaves it to the whole table (INT8, FP16, the ONNX
# Runtime anchor, one face, every CPU model): BENCHMARKS.md's, run by hand. Then the cross test builds, tested under qemu-user
# within what is left of CI's 90 minutes (87, for slack): armv7 its unit
# tests; aarch64 its unit tests and a fixed set of integration tests, every
# time: the daemon end to end, its config, HTTP, discovery, the store,
# capture and the CLI (the set ran in 10.6-12.3 min under qemu-aarch64 on this
# kind of machine, 56 s of it the CLI's). A build or a suite the deadline
# stops is counted as skipped, and a second skip in a row with the same
# cache fails the run.
arm_packages() {
    CROSS_STEPS=deb bash tests/cross/run.sh armv7 aarch64
}
# The cross test builds run ahead, beside steps that leave a core idle (an
# LTO link is one thread, the VM one vCPU); the cross step then finds them
# fresh. A failed build fails the step it runs beside; a cut one is carried
# on by the cross step, whose own marks count it.
cross_build() {
    CROSS_IT="${2:-}" CROSS_STEPS=build bash tests/cross/run.sh "$1" >"$work/cross-build-$1.log" 2>&1 ||
        { cat "$work/cross-build-$1.log"; echo "tests/run.sh: the $1 cross test build failed" >&2; return 1; }
    grep -h "test build in" "$work/cross-build-$1.log" || true
}
deb_amd64_beside_armv7_build() {
    local build_status=0 deb_status=0 build_pid
    cross_build armv7 &
    build_pid=$!
    bash tests/deb/run.sh amd64 || deb_status=$?
    wait "$build_pid" || build_status=$?
    ((deb_status == 0)) || echo "tests/run.sh: the amd64 package failed (exit $deb_status)" >&2
    ((deb_status == 0 && build_status == 0))
}
# The steps after fuzzing but the cross tests (the packages, the VM, the ARM
# cost model) run within CROSS_DEADLINE less the cross tests' 15 minutes
# (their builds ready, armv7's unit tests and aarch64's set took 12):
# `bounded ID CMD...` runs CMD as its own process group and stops the whole
# group (a VM, qemu-user, cargo) when that time is up. A cut is printed,
# listed in the summary and marked in the cache as the cross tests' cuts
# are; a second cut of the same step in a row with the same cache fails.
cross_reserve=15
bounded() {
    local id=$1 mark="$CARGO_TARGET_DIR/cross/skipped/$1" limit rc=0 pid guard
    shift
    mkdir -p "${mark%/*}"
    limit=$((CROSS_DEADLINE - $(date +%s) - cross_reserve * 60))
    if ((limit < 3 * 60)); then
        cut_by_deadline "$id" "$mark" "not run: $((limit / 60)) min left before the cross tests' $cross_reserve"
        return
    fi
    set -m
    "$@" &
    pid=$!
    set +m
    (sleep "$limit" && touch "$work/$id.cut" && kill -TERM -- "-$pid" && sleep 30 && kill -KILL -- "-$pid") \
        >/dev/null 2>&1 &
    guard=$!
    wait "$pid" || rc=$?
    pkill -P "$guard" 2>/dev/null || true
    kill "$guard" 2>/dev/null || true
    if [ -f "$work/$id.cut" ]; then
        cut_by_deadline "$id" "$mark" "stopped after $limit s to leave the cross tests $cross_reserve min"
        return
    fi
    ((rc == 0)) || return "$rc"
    rm -f "$mark"
}
cut_by_deadline() {
    echo "$1: SKIPPED: $3"
    cuts+=("$1: $3")
    if [ -f "$2" ]; then
        echo "tests/run.sh: $1 was cut on the previous run with this cache as well ($(cat "$2"))." \
            "Run it on its own once to fill the cache." >&2
        return 1
    fi
    echo "$3" >"$2"
}
arm_cost() {
    ARM_COST_QUICK=1 ARM_COST_CPUS="cortex-a76 cortex-a7" bash benches/arm-cost.sh "$work/arm-cost"
}
aarch64_it="daemon:: daemon_config:: http:: discovery:: store:: capture:: cli::"
cross() {
    CROSS_STEPS="build test" bash tests/cross/run.sh armv7
    CROSS_STEPS="build test" CROSS_IT="$aarch64_it" bash tests/cross/run.sh aarch64
}

# The VM (qemu TCG, two vCPUs: about 1.3 cores busy on average) and the ARM
# packages (their time is the two single-threaded LTO links, one after the
# other) run side by side; tests/vm/run.sh boots the guest a second time
# when its first boot hangs under that load. The VM's log is printed when both are
# done; either failing fails the step.
vm_beside_arm_packages() {
    local vm_status=0 deb_status=0 vm_pid
    { bash tests/vm/run.sh > "$work/vm.log" 2>&1 && cross_build aarch64 "$aarch64_it" > "$work/vm-then-build.log"; } &
    vm_pid=$!
    arm_packages || deb_status=$?
    wait "$vm_pid" || vm_status=$?
    echo "== VM boot test's log"
    cat "$work/vm.log"
    cat "$work/vm-then-build.log" 2>/dev/null || true
    ((deb_status == 0)) || echo "tests/run.sh: the ARM packages failed (exit $deb_status)" >&2
    ((vm_status == 0)) || echo "tests/run.sh: the VM boot test or the aarch64 test build after it failed (exit $vm_status)" >&2
    ((deb_status == 0 && vm_status == 0))
}

step 30 "contract and INT8 models (models/quantize; INT8 vs FP32 on onnxruntime)" models
step 60 "cargo fmt --check, cargo clippy (default, ort, no engines)" lint
# The debug build carries the C2PA signer (the `c2pa` feature, not yet
# default: Cargo.toml says why), so its tests (tests/it/c2pa.rs, checked by
# c2pa-python) run here, and the soak and pytest run this binary.
step 440 "cargo test --workspace --features c2pa (tract only: no ONNX Runtime code in the binary)" cargo test --workspace --features c2pa
# The same crate with ONNX Runtime compiled in: the tests that differ with
# it (the engine modules and the CLI's engine choice, the engine agreement
# and FP16 refusal tests); the rest ran in the step before.
ort_tests() {
    cargo test --features ort --lib -- infer:: cli::
    cargo test --features ort --test it -- engines:: fp16::
}
step 170 "cargo test --features ort (ONNX Runtime from the venv's wheel: infer::, cli::, engines::, fp16::)" ort_tests
step 30 "x86 kernel tiers forced down: FUSIOND_CPU=avx2, then scalar" kernel_tiers
step 15 "Yocto layer lint (oelint-adv, and a broken recipe it must reject)" bash yocto/lint.sh
step 15 "GPU check without a GPU (tests/gpu/check.sh must say \"no GPU\")" gpu_check
step 45 "onnxruntime agreement (pytest)" pytests
# The soak's short version: the same faults and goals as tests/soak.sh 1h,
# in 2 minutes, on the dev build cargo test made. It measures frame rates,
# so nothing runs beside it.
step 150 "soak under faults, 2 minutes (tests/soak.sh 2m)" env FUSIOND_BIN="$CARGO_TARGET_DIR/debug/fusiond" bash tests/soak.sh 2m
# The soak's goals see the worker: one with the worker stalled at 40 s must fail.
step 145 "a soak with a stalled worker fails (SOAK_STALL=40 tests/soak.sh 90)" soak_stalled
# Every fuzz target for 20 s (about 13 min more from a cold cache: nightly,
# cargo-fuzz and the sanitizer build of fusiond without its engines).
step 280 "fuzzing, 20 s a target (tests/fuzz.sh 20)" bash tests/fuzz.sh 20
export CROSS_DEADLINE=$(($(date +%s) + 87 * 60 - SECONDS))
# The amd64 package: the edge build against a bullseye sysroot (most of it
# the LTO link, one thread), lintian, its files, its glibc floor and a run
# on bullseye's glibc. The VM test installs it. Beside it, armv7's unit
# test build.
step 480 "Debian package, amd64 (tests/deb/run.sh amd64), beside armv7's cross test build" \
    bounded deb-amd64 deb_amd64_beside_armv7_build
# The VM took 9 min 52 s with the one-hour soak running beside it; the
# drivers' checks (tests/vm/drivers.sh) restart the daemon three times.
step 1180 "Debian packages, armhf and arm64 (tests/cross/run.sh, CROSS_STEPS=deb), beside the VM boot test (tests/vm/run.sh: bookworm guest, vivid, mosquitto, YUYV/NV12/MJPEG in and YUYV/MJPG out through v4l2loopback, the package and its units, upgrade and removal) and then aarch64's cross test build" \
    bounded vm-and-arm-packages vm_beside_arm_packages
step 590 "ARM cost model (benches/arm-cost.sh: cortex-a76, armv7 cortex-a7)" bounded arm-cost arm_cost
step 860 "cross tests under qemu-user: armv7 unit tests, aarch64 unit and integration set (until minute 87)" cross
