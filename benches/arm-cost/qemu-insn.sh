#!/usr/bin/env bash
# Sourced by benches/arm-cost.sh: an instruction-counting qemu-user, from
# Debian's own packages and nothing else.
#
#   qemu_insn DIR     sets qemu_aarch64, qemu_arm (qemu-user 7.2's binaries)
#                     and insn_plugin (its tests/plugin/insn.c, built), all
#                     cached under DIR
#
# Why qemu 7.2: bookworm's qemu-user is built with plugin support; the
# backported qemu 10 some machines carry (the VM tests install it) is not.
# 7.2 passes the host's /proc/cpuinfo through, so benches/arm-cost.sh gives
# each run the emulated CPU's own file (a bind mount in a private mount
# namespace), which is where tract reads FP16 and the core's model from.
#
# The plugin is built from the source package of the very same qemu version
# (its include/qemu/qemu-plugin.h and tests/plugin/insn.c), fetched through
# a private apt state with a deb-src line for Debian's archive, so the
# machine's own apt configuration is left as it is.

qemu_insn() {
    local dir=$1 bin_version src_version
    mkdir -p "$dir"
    local find='$2 ~ /1:7\.2\+/ {gsub(/ /, "", $2); print $2; exit}'
    bin_version=$(apt-cache madison qemu-user | awk -F'|' "$find")
    if [ -z "$bin_version" ]; then
        apt-get update -qq || true
        bin_version=$(apt-cache madison qemu-user | awk -F'|' "$find")
    fi
    [ -n "$bin_version" ] || { echo "arm-cost: Debian's qemu-user 7.2 is not in apt's lists (apt-get update?)" >&2; return 1; }
    if [ ! -x "$dir/$bin_version/usr/bin/qemu-aarch64" ]; then
        echo "arm-cost: extracting qemu-user $bin_version into $dir"
        rm -rf "$dir/$bin_version" "$dir/debs"
        mkdir -p "$dir/debs"
        (cd "$dir/debs" && apt-get -o APT::Sandbox::User=root download -qq "qemu-user=$bin_version") || return 1
        dpkg -x "$dir"/debs/qemu-user_*.deb "$dir/$bin_version"
        rm -rf "$dir/debs"
        # Its libraries (capstone, numa, uring, gnutls, glib) are bookworm's.
        local missing
        missing=$(LD_LIBRARY_PATH= ldd "$dir/$bin_version/usr/bin/qemu-aarch64" | awk '/not found/ {print $1}')
        if [ -n "$missing" ]; then
            echo "arm-cost: installing qemu-user 7.2's libraries ($missing)"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                libcapstone4 libnuma1 liburing2 libgnutls30 libglib2.0-0 >/dev/null
        fi
    fi
    qemu_aarch64="$dir/$bin_version/usr/bin/qemu-aarch64"
    qemu_arm="$dir/$bin_version/usr/bin/qemu-arm"
    insn_plugin="$dir/$bin_version/libinsn.so"
    [ -f "$insn_plugin" ] && return 0

    src_version=$(apt-cache show "qemu-user=$bin_version" | sed -n 's/^Source: qemu (\(.*\))$/\1/p' | head -1)
    src_version=${src_version:-${bin_version%+b*}}
    local apt="$dir/apt" tarball
    mkdir -p "$apt/lists/partial" "$apt/archives/partial"
    printf 'deb-src http://deb.debian.org/debian bookworm main\ndeb-src http://deb.debian.org/debian bookworm-updates main\ndeb-src http://deb.debian.org/debian-security bookworm-security main\n' >"$apt/sources.list"
    local opts=(-o APT::Sandbox::User=root -o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache::Archives=$apt/archives")
    echo "arm-cost: fetching Debian's qemu $src_version source for its insn plugin"
    apt-get "${opts[@]}" update -qq || return 1
    (cd "$apt" && apt-get "${opts[@]}" source --download-only -qq "qemu=$src_version") || return 1
    tarball=$(ls "$apt"/qemu_*.orig.tar.* | head -1)
    rm -rf "$apt/src" && mkdir -p "$apt/src"
    tar -xf "$tarball" -C "$apt/src" --strip-components=1 --wildcards \
        '*/include/qemu/qemu-plugin.h' '*/tests/plugin/insn.c'
    dpkg -s libglib2.0-dev >/dev/null 2>&1 ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libglib2.0-dev pkg-config >/dev/null
    # shellcheck disable=SC2046
    gcc -O2 -shared -fPIC -I"$apt/src/include/qemu" $(pkg-config --cflags glib-2.0) \
        "$apt/src/tests/plugin/insn.c" -o "$insn_plugin" $(pkg-config --libs glib-2.0) || return 1
    rm -rf "$apt"
    echo "arm-cost: $insn_plugin built"
}
