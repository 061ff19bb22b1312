#!/usr/bin/env bash
# The ARM cost model: instructions that the shipping ARM builds of fusiond
# (the Debian packages' release binaries) execute under qemu-user, counted
# by qemu's insn plugin, per model and per live frame, on the fleet's CPU
# models. Instruction counts are a proxy for time, not time: they see no
# cache, memory bandwidth, pipeline or thermal limit. The figures that count
# are ratios between configurations on one CPU model.
#
#   benches/arm-cost.sh [OUTDIR]    (default benches/results/arm-cost-DATE)
#
# Each CPU model runs with its own /proc/cpuinfo (benches/arm-cost/cpuinfo,
# bind-mounted in a private mount namespace), so tract picks the kernels a
# real core of that model gets: FP16 and the core's part number are read
# from there, dot product from the HWCAPs qemu's -cpu reports.
#   cortex-a76  dot product and FP16 (Pi 5, RK3588; Orin's A78AE class)
#   cortex-a72  neither (Pi 4)
#   cortex-a7   armv7 NEON (the 32-bit boards)
#
# Each row is one configuration: stock tract (--tract-stock-ops), fusiond's
# default, INT8 (the models/quantize twins) on both, INT8 with every
# activation rounded to its grid (--int8-activations grid: the default
# where the CPU has a dot product, so a row of its own only elsewhere), FP16 (--precision fp16,
# on cortex-a76 only: the one CPU model here with FP16 arithmetic), and ONNX Runtime's own
# aarch64 build (the PyPI wheel's libonnxruntime, through the ort feature)
# on cortex-a76 as the anchor. A row's figure is one run's instructions: the
# count with RUNS runs after the warm-up less the count with none, over
# RUNS, so loading and planning drop out.
#
# The swapper is models/make_bench_swapper.py's inswapper-shaped graph at
# --div 16 (1.4 GFLOP a swap against 349 for inswapper_128's shape): its
# convolutions' work scales with the square of the channel widths, so a
# full-size swap costs about 250 times the count (the table says so).
#
# Environment:
#   ARM_COST_CPUS       CPU models (default "cortex-a76 cortex-a72 cortex-a7")
#   ARM_COST_RUNS       runs a row's figure is taken over (default 1)
#   ARM_COST_QUICK      1: only what the rule below needs, stock tract and the
#                       default, every model and the two-face frame (CI's run)
#   ARM_COST_CONFIGS    only these configurations' rows (default: all), e.g.
#                       "int8 int8_grid" after a change to INT8 alone
#   ARM_COST_BUILD      1 (default): build the release binaries as
#                       debian/build.sh does (a no-op after it); 0: use them
#   FUSIOND_INT8_MODELS the INT8 twins (default: made here by models/quantize)
#   FUSIOND_SHARED      the shared models and photos (default ../shared)
#
# Exit status: 1 when fusiond's default executes more instructions than
# stock tract for a model or a frame on any CPU model (the "never slower on
# ARM" rule); the other goals are reported, not enforced.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/setup.sh >/dev/null
. tests/cross/toolchain.sh
. benches/arm-cost/qemu-insn.sh

shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
for f in models/face_detection_yunet_2023mar.onnx models/scrfd_500m_bnkps.onnx models/arcface_fr_feature.onnx \
    models/landmark68_fr.onnx images/fr_obama.jpg images/fr_biden.jpg camera/two_people_pan/frame_001.jpg; do
    [ -f "$shared/$f" ] || { echo "arm-cost: $shared/$f is missing (set FUSIOND_SHARED to the shared folder)" >&2; exit 1; }
done
out="${1:-benches/results/arm-cost-$(date +%F)}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
cpus=(${ARM_COST_CPUS:-cortex-a76 cortex-a72 cortex-a7})
runs=${ARM_COST_RUNS:-1}
quick=${ARM_COST_QUICK:-0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cache="$CARGO_TARGET_DIR/cross/arm-cost"
mkdir -p "$cache"
start=$SECONDS

qemu_insn "$cache/qemu"

echo "== models: the INT8 twins and the --div 16 swapper"
int8="${FUSIOND_INT8_MODELS:-$work/int8}"
[ -f "$int8/manifest.toml" ] ||
    "$FUSIOND_PYTHON" models/quantize --models "$shared/models" --photos "$shared/images" --out "$int8" >/dev/null
"$FUSIOND_PYTHON" models/make_bench_swapper.py --int8 --div 16 "$work/swapper" 2>/dev/null | sed 's/^/arm-cost: /'
models=(--models "$shared/models" --models "$int8" --models "$work/swapper")

# ONNX Runtime's aarch64 build: the wheel of the venv's own version, and
# bullseye's arm64 libstdc++ beside it, for the bullseye sysroot the
# release binary is built against (the sysroots carry none).
ort_anchor() {
    local version dir="$cache/ort-arm64"
    version=$("$FUSIOND_PYTHON" -c 'import onnxruntime; print(onnxruntime.__version__)')
    if [ ! -f "$dir/$version/lib/libonnxruntime.so.$version" ]; then
        echo "arm-cost: fetching onnxruntime $version's aarch64 wheel"
        rm -rf "$dir/$version" && mkdir -p "$dir/$version/lib"
        "$FUSIOND_PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
            --platform manylinux_2_28_aarch64 -d "$dir/$version/wheel" "onnxruntime==$version"
        (cd "$dir/$version/lib" && unzip -q -j "$dir/$version"/wheel/*.whl 'onnxruntime/capi/libonnxruntime.so*')
        rm -rf "$dir/$version/wheel"
    fi
    if [ ! -d "$dir/stdc++-bullseye/usr/lib/aarch64-linux-gnu" ]; then
        rm -rf "$dir/stdc++-bullseye"
        mmdebstrap --quiet --arch=arm64 --variant=extract --include=libstdc++6,libgcc-s1 \
            bullseye "$dir/stdc++-bullseye" http://deb.debian.org/debian >/dev/null
    fi
    ort_library="$dir/$version/lib/libonnxruntime.so.$version"
    ort_libdir="$dir/stdc++-bullseye/usr/lib/aarch64-linux-gnu"
}

# count CPU TAG -- ARGS: one qemu run of $bin with ARGS under $qemu -cpu CPU
# and CPU's /proc/cpuinfo; writes the instructions to $work/TAG.insns and
# fusiond's output to $work/TAG.out.
count() {
    local cpu=$1 tag=$2 log="$work/$2.log"
    shift 3
    local env=()
    [ -n "${ld_path:-}" ] && env=(-E "LD_LIBRARY_PATH=$ld_path")
    rm -f "$log"
    if ! unshare -m sh -c 'mount --bind "$0" /proc/cpuinfo && exec "$@"' \
        "$PWD/benches/arm-cost/cpuinfo/$cpu" "$qemu" -cpu "$cpu" -L "$sysroot" "${env[@]}" \
        -plugin "$insn_plugin,inline=on" -d plugin -D "$log" "$bin" "$@" >"$work/$tag.out" 2>"$work/$tag.err"; then
        echo "arm-cost: failed on $cpu: fusiond $*" >&2
        tail -5 "$work/$tag.err" >&2
        return 1
    fi
    sed -n 's/^insns: //p' "$log" >"$work/$tag.insns"
}

# row CPU KIND NAME CONFIG -- ARGS: one row of rows.jsonl, from two counts
# run side by side (two cores): no runs after the warm-up, and $runs.
row() {
    local cpu=$1 kind=$2 name=$3 config=$4 a b
    shift 5
    [ -z "${ARM_COST_CONFIGS:-}" ] || [[ " $ARM_COST_CONFIGS " == *" $config "* ]] || return 0
    count "$cpu" c0 -- cost "$kind" "$@" --runs 0 &
    a=$!
    count "$cpu" cn -- cost "$kind" "$@" --runs "$runs" &
    b=$!
    wait "$a" && wait "$b" || return 1
    "$FUSIOND_PYTHON" benches/arm-cost/row.py "$cpu" "$arch" "$kind" "$name" "$config" "$(cat "$work/c0.insns")" \
        "$(cat "$work/cn.insns")" "$runs" "$work/cn.out" >>"$out/rows.jsonl"
    printf '%-11s %-5s %-16s %-11s %10.1f M  (at %d s)\n' "$cpu" "$kind" "$name" "$config" \
        "$(tail -1 "$out/rows.jsonl" | "$FUSIOND_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["insns"] / 1e6)')" \
        $((SECONDS - start))
}

: >"$out/rows.jsonl"
for cpu in "${cpus[@]}"; do
    case $cpu in
    cortex-a7) arch=armv7 ;;
    *) arch=aarch64 ;;
    esac
    toolchain "$arch" bullseye
    if [ "${ARM_COST_BUILD:-1}" = 1 ]; then
        # The packages' build (debian/build.sh), found fresh: the same
        # features and environment, SOURCE_DATE_EPOCH unset as there.
        env -u SOURCE_DATE_EPOCH cargo build --release --target "$triple" --features ort --bin fusiond --quiet
    fi
    bin="$CARGO_TARGET_DIR/$triple/release/fusiond"
    qemu=$qemu_aarch64
    [ "$arch" = armv7 ] && qemu=$qemu_arm
    ld_path=
    echo "== $cpu ($arch): instructions per run ($runs runs after the warm-up, less none)"
    tract=(--engine tract --threads 1)
    stock=(--engine tract --threads 1 --tract-stock-ops)
    half=()
    [ "$cpu" = cortex-a76 ] && [ "$quick" != 1 ] && half=(--engine tract --threads 1 --precision fp16)
    ort=()
    if [ "$cpu" = cortex-a76 ] && [ "$quick" != 1 ]; then
        ort_anchor
        ort=(--engine ort --ort-library "$ort_library" --threads 1)
    fi
    for m in yunet_2023mar scrfd_500m arcface_fr landmark68_fr inswapper_bench; do
        row "$cpu" model "$m" stock -- "$m" "${models[@]}" "${stock[@]}"
        row "$cpu" model "$m" default -- "$m" "${models[@]}" "${tract[@]}"
        if [ "$quick" != 1 ] && [ "$m" != landmark68_fr ]; then
            row "$cpu" model "$m" int8 -- "${m}_int8" "${models[@]}" "${tract[@]}"
            row "$cpu" model "$m" int8_stock -- "${m}_int8" "${models[@]}" "${stock[@]}"
            [ "$cpu" = cortex-a76 ] ||
                row "$cpu" model "$m" int8_grid -- "${m}_int8" "${models[@]}" "${tract[@]}" --int8-activations grid
        fi
        ((${#half[@]})) && row "$cpu" model "$m" fp16 -- "$m" "${models[@]}" "${half[@]}"
        if ((${#ort[@]})); then
            ld_path=$ort_libdir
            row "$cpu" model "$m" ort -- "$m" "${models[@]}" "${ort[@]}"
            [ "$m" = landmark68_fr ] || row "$cpu" model "$m" ort_int8 -- "${m}_int8" "${models[@]}" "${ort[@]}"
            ld_path=
        fi
    done
    frames=(1 2)
    [ "$quick" = 1 ] && frames=(2)
    for faces in "${frames[@]}"; do
        if [ "$faces" = 1 ]; then frame="$shared/images/fr_obama.jpg"; else frame="$shared/camera/two_people_pan/frame_001.jpg"; fi
        f=(--frame "$frame" --source "$shared/images/fr_biden.jpg" "${models[@]}")
        fp32=(--detector yunet_2023mar --recognizer arcface_fr --swapper inswapper_bench)
        q8=(--detector yunet_2023mar_int8 --recognizer arcface_fr_int8 --swapper inswapper_bench_int8)
        row "$cpu" frame "frame_${faces}face" stock -- "${f[@]}" "${fp32[@]}" "${stock[@]}"
        row "$cpu" frame "frame_${faces}face" default -- "${f[@]}" "${fp32[@]}" "${tract[@]}"
        if [ "$quick" != 1 ]; then
            row "$cpu" frame "frame_${faces}face" int8 -- "${f[@]}" "${q8[@]}" "${tract[@]}"
            [ "$cpu" = cortex-a76 ] ||
                row "$cpu" frame "frame_${faces}face" int8_grid -- "${f[@]}" "${q8[@]}" "${tract[@]}" --int8-activations grid
        fi
        ((${#half[@]})) && row "$cpu" frame "frame_${faces}face" fp16 -- "${f[@]}" "${fp32[@]}" "${half[@]}"
        if ((${#ort[@]})); then
            ld_path=$ort_libdir
            row "$cpu" frame "frame_${faces}face" ort -- "${f[@]}" "${fp32[@]}" "${ort[@]}"
            ld_path=
        fi
    done
done
echo "== the table ($((SECONDS - start)) s)"
"$FUSIOND_PYTHON" benches/arm-cost/report.py "$out/rows.jsonl" "$out/table.md"
