#!/usr/bin/env bash
# Cross builds for the fleet without Docker, tested under qemu-user:
#   aarch64-unknown-linux-gnu (Jetson, 64-bit ARM boards) and
#   armv7-unknown-linux-gnueabihf (32-bit ARM boards).
# Debian's cross gcc is the linker and CC (ring and tract-linalg assemble
# with it); the target's libc, libsystemd and kernel headers come from a
# Debian bookworm sysroot that mmdebstrap extracts (cached in the target dir),
# so the host's dpkg architectures stay as they are (tests/cross/toolchain.sh).
#
#   tests/cross/run.sh [aarch64|armv7]...   (default: both)
#   CROSS_STEPS="build test"                (default; "build" only skips qemu;
#                                            "deb": the target's Debian package, built
#                                            against bullseye and checked by tests/deb/run.sh)
#   CROSS_IT="capture:: cli::"              integration test filters to run under qemu too ("all": every one)
#   CROSS_DEADLINE=<unix time>              stop building at this time (CI's time budget): what
#                                            finished stays cached for the next run, and the
#                                            tests that were not built are skipped, saying so
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/fusiond-target}"
arches=("$@")
((${#arches[@]})) || arches=(aarch64 armv7)
steps="${CROSS_STEPS:-build test}"

. tests/cross/toolchain.sh

# What this run skipped or cut, for the summary at the end. A target whose
# tests are skipped or cut twice in a row with the same cache fails the run:
# a deadline may cut them once while the cache fills, not for ever. The mark
# the previous run left is read once, when the target's turn comes, and is
# removed only when the target's turn ends with nothing skipped or cut.
skipped=()
repeated=()
marks="$CARGO_TARGET_DIR/cross/skipped"
mkdir -p "$marks"
previous=""
cut=0
skip() {
    skipped+=("$1: $2")
    cut=1
    [ -n "$previous" ] && repeated+=("$1 ($previous, then $2)")
    echo "$2" >"$marks/$(mark "$1")"
}
summary() {
    if ((${#skipped[@]})); then
        echo "cross: summary: SKIPPED: $(printf '%s; ' "${skipped[@]}")"
    else
        echo "cross: summary: nothing skipped"
    fi
    if ((${#repeated[@]})); then
        echo "cross: FAILED: tests skipped on the previous run with this cache as well: ${repeated[*]}." \
            "Give the run more time (CROSS_DEADLINE) or run tests/cross/run.sh on its own once to fill the cache." >&2
        exit 1
    fi
}
trap summary EXIT

# Seconds left before CROSS_DEADLINE (a day when there is none).
left() { if [ -n "${CROSS_DEADLINE:-}" ]; then echo $((CROSS_DEADLINE - $(date +%s))); else echo 86400; fi; }
# Runs a step within the deadline: exits when it fails, returns 75 when the
# deadline stopped it (and then stops what it left running under this
# target's qemu, whichever sysroot: the test binary, the fusiond copies the
# tests spawned, the package check's detect).
within_deadline() {
    local rc=0
    timeout -k 30 "$(left)" "$@" || rc=$?
    if ((rc == 124 || rc == 137)); then
        [ -n "${qemu:-}" ] && pkill -f -- "^$qemu " || true
        return 75
    fi
    ((rc == 0)) || exit "$rc"
}
# What a build stopped by the deadline leaves.
build_stopped() {
    echo "cross: $triple: the build reached CROSS_DEADLINE; the crates it finished are cached" \
        "in $CARGO_TARGET_DIR and the next run carries on from them. Its tests are skipped this time."
}

# The kernels' and the tract ops' tests on each CPU model the fleet has
# (qemu-user gives each its own HWCAP bits, which std's feature detection
# reads), and once with the kernels capped to their plain loops; the log
# names the features each run used ("fusiond kernels: ...").
kernel_cpus() {
    local cpu cap test tests
    # The unit test binaries the workspace build made (the same features,
    # so no second build of tract), run straight under qemu.
    tests=$(cargo test --workspace --profile cross --target "$triple" --lib --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json, sys
for j in map(json.loads, sys.stdin):
    if j.get("executable") and j["target"]["name"] in ("fusiond_kernels", "fusiond_tract_ops"):
        print(j["executable"])')
    [ -n "$tests" ] || { echo "cross: no kernel test binaries for $triple" >&2; exit 1; }
    for cpu in $kernel_cpus; do
        for cap in "" scalar; do
            [ -z "$cap" ] || [ "$cpu" = "${kernel_cpus%% *}" ] || continue
            echo "cross: kernels under $qemu -cpu $cpu${cap:+, FUSIOND_CPU=$cap}"
            for test in $tests; do
                FUSIOND_CPU="$cap" $qemu -cpu "$cpu" -L "$sysroot" "$test" --nocapture 2>&1 |
                    grep -E '^fusiond kernels|^test result|FAILED|^error'
            done
        done
    done
}

# One mark per target and steps: a run of the package step alone says
# nothing about the tests.
mark() { echo "$1-${steps// /-}"; }
for arch in "${arches[@]}"; do
    previous=$(cat "$marks/$(mark "$arch")" 2>/dev/null || true)
    cut=0
    if (($(left) < 120)); then
        echo "cross: $arch SKIPPED: less than 2 min left before CROSS_DEADLINE"
        skip "$arch" "not built: less than 2 min left"
        continue
    fi
    toolchain "$arch" bookworm
    if [[ " $steps " == *" deb "* ]]; then
        start=$SECONDS
        within_deadline bash tests/deb/run.sh "$deb" || {
            build_stopped
            skip "$arch" "package not built: the build reached CROSS_DEADLINE"
            continue
        }
        echo "cross: $deb package built and checked in $((SECONDS - start)) s"
        # tests/deb/run.sh set the bullseye sysroot's variables in its own
        # process only; these are the bookworm ones again.
    fi
    # Spawned copies of the binary (CLI and daemon tests) run through qemu too.
    export FUSIOND_TEST_RUNNER="$emulator"
    # Emulated, models load and run about ten times slower.
    export FUSIOND_TEST_SLOWDOWN=10

    if [[ " $steps " == *" build "* ]]; then
        start=$SECONDS
        # Without integration tests to run (armv7), the unit tests' binaries
        # only: the integration tests' binary and fusiond's own are a second
        # build of the crate.
        build=(build --tests --bins)
        [ -n "${CROSS_IT:-}" ] || build=(test --no-run --lib)
        within_deadline cargo "${build[@]}" --workspace --profile cross --target "$triple" --quiet || {
            build_stopped
            skip "$arch" "tests not run: the build reached CROSS_DEADLINE"
            continue
        }
        echo "cross: $triple test build in $((SECONDS - start)) s"
    fi
    if [[ " $steps " == *" test "* ]] && (($(left) < 240)); then
        echo "cross: $triple tests SKIPPED: less than 4 min left before CROSS_DEADLINE"
        skip "$arch" "tests not run: less than 4 min left"
        continue
    fi
    if [[ " $steps " == *" test "* ]]; then
        start=$SECONDS
        # The V4L2 ioctl numbers from the target's C headers, for the unit
        # test that checks bindgen's struct layouts against them.
        probe="$CARGO_TARGET_DIR/cross/v4l2-ioctls-$deb"
        "$gnu-gcc" --sysroot="$sysroot" tests/cross/v4l2_ioctls.c -o "$probe"
        $emulator "$probe" >"$probe.txt"
        export FUSIOND_V4L2_IOCTLS="$probe.txt"
        cargo test --profile cross --target "$triple" --lib --quiet
        echo "cross: $triple unit tests under $qemu in $((SECONDS - start)) s"
        kernel_cpus
    fi
    # Integration tests under emulation (default: none). The whole suite
    # took 53 min under qemu-aarch64 in CI's last run (3202 s, with the
    # daemon and pixel tests); `capture:: cli::` (frame sources,
    # the CLI on the real models and photos) about 1. With less than 72 min
    # left before CROSS_DEADLINE, "all" runs those two only (the HTTP, discovery,
    # no-broker, token, bomb, flood and mTLS tests added since add about 14 min:
    # about 67 in all).
    # `CROSS_IT=stability::` runs the pan tests.
    if [ -n "${CROSS_IT:-}" ] && [[ " $steps " == *" test "* ]]; then
        start=$SECONDS
        it="$CROSS_IT"
        if [ "$it" = all ] && (($(left) < 72 * 60)); then
            it="capture:: cli::"
            echo "cross: $triple: $(($(left) / 60)) min left before CROSS_DEADLINE, too few for every" \
                "integration test under qemu (about 67 min); running \"$it\" only"
            skip "$arch" "integration tests cut from all to \"$it\" ($(($(left) / 60)) min left)"
        fi
        read -ra filters <<<"$it"
        # "all" leaves out the synthetic-pan stability tests: they are
        # arithmetic over the engine's outputs (which the face-core tests
        # check under emulation), and two runs over 51 rendered frames each
        # take many minutes under qemu. The browser test is left out too:
        # it checks the page's script in Chromium, which is the host's
        # whatever the daemon's architecture.
        [ "$it" = all ] && filters=(--skip stability:: --skip browser::)
        # Bounded like the builds: tests still running at the deadline are
        # stopped and the target counts as skipped (so twice in a row fails).
        if (($(left) < 300)); then
            echo "cross: $triple integration tests SKIPPED: less than 5 min left before CROSS_DEADLINE"
            skip "$arch" "integration tests ($it) not run: less than 5 min left"
            continue
        fi
        within_deadline cargo test --profile cross --target "$triple" --test it --quiet -- "${filters[@]}" || {
            echo "cross: $triple integration tests ($it) reached CROSS_DEADLINE after $((SECONDS - start)) s" \
                "and were stopped; the ones that had not finished are skipped this time"
            skip "$arch" "integration tests ($it) stopped at CROSS_DEADLINE"
            continue
        }
        echo "cross: $triple integration tests ($it) under $qemu in $((SECONDS - start)) s"
    fi
    ((cut)) || rm -f "$marks/$(mark "$arch")"
done
