# Sourced by tests/cross/run.sh and debian/build.sh: one Debian sysroot per
# (suite, architecture) and the cargo, cc, pkg-config and bindgen settings
# that build against it.
#
#   toolchain ARCH SUITE    ARCH: x86_64|amd64, aarch64|arm64, armv7|armhf;
#                           SUITE: bookworm (the cross tests) or bullseye
#                           (the release packages: glibc 2.31, which JetPack 5
#                           and Debian 11 carry)
#
# Sets triple, gnu (the GNU triplet), deb (the Debian architecture), qemu
# (empty on x86_64), sysroot and emulator (the command line that runs one of
# the target's programs: qemu with its CPU and the sysroot; empty on x86_64),
# and exports the build settings for $triple.
#
# aarch64 is emulated as a Cortex-A76 (ARMv8.2 with dotprod: the class of
# Jetson Orin's A78AE and Xavier's Carmel), not as qemu's default "max".
# tract picks its matmul kernels from the HWCAPs qemu reports, and "max"
# reports SVE2 with 64-byte vectors, which no box in the fleet has: tract's
# ISA was then "aarch64,dotprod,sve2" and its convolutions ran
# sve_mmm_f32_8x8, where a Cortex-A76 gets arm64simd_mmm_f32_8x8_gen as a
# Jetson does (`fusiond -v detect` logs both). Emulated 512-bit vectors are
# also slow on some hosts: one detect took 20.4 s against 15.3 here, and
# 210 s in CI (armhf's, 21 s). armv7 keeps qemu's default; tract reads NEON
# there from /proc/cpuinfo, which qemu-user 7.2 passes through from the
# host, so no -cpu changes which kernels run.
#
# The sysroot is extracted once by mmdebstrap (no dpkg architectures are
# added to the host) and cached under $CARGO_TARGET_DIR/cross. It also gets
# a dpkg database built from the packages it was extracted from, so that
# dpkg-shlibdeps can compute a package's dependencies against it.

toolchain_tools() {
    local need=() p
    for p in gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf binutils-aarch64-linux-gnu binutils-arm-linux-gnueabihf \
        qemu-user mmdebstrap dpkg-dev file; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
    done
    if ((${#need[@]})); then
        echo "toolchain: installing ${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq || echo "toolchain: apt-get update reported errors; trying the install anyway"
        # The VM test's host tools may be installing beside this (tests/run.sh
        # runs the two side by side): wait for dpkg's lock rather than fail.
        apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
}

# Makes the sysroot usable from outside: absolute symlinks (libc6's
# /lib64/ld-linux-x86-64.so.2, say) would point into the host, so they
# become relative ones.
toolchain_relink() {
    local root=$1 link
    find "$root" -type l -lname '/*' | while read -r link; do
        ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$root$(readlink "$link")")" "$link"
    done
}

# Registers the extracted packages (kept in the sysroot's apt cache) in a
# dpkg database of the sysroot's own: status, file lists and the symbols
# and shlibs files that dpkg-shlibdeps reads. The file lists name the files
# by their path on the host (the sysroot's path in front), since that is the
# path dpkg-shlibdeps finds a library at and asks dpkg-query about.
toolchain_dpkg_db() {
    local root=$1 db="$1/var/lib/dpkg" debfile pkg arch name ctl
    mkdir -p "$db/info" "$db/updates"
    echo 1 >"$db/info/format"
    : >"$db/status"
    : >"$db/available"
    for debfile in "$root"/var/cache/apt/archives/*.deb; do
        pkg=$(dpkg-deb -f "$debfile" Package)
        arch=$(dpkg-deb -f "$debfile" Architecture)
        name="$pkg"
        [ "$(dpkg-deb -f "$debfile" Multi-Arch)" = same ] && name="$pkg:$arch"
        { dpkg-deb -f "$debfile" | grep -v '^Status:'; echo "Status: install ok installed"; echo; } >>"$db/status"
        dpkg-deb --fsys-tarfile "$debfile" | tar -t | sed -e "s|^\./|$root/|" -e 's|/$||' >"$db/info/$name.list"
        ctl=$(mktemp -d)
        dpkg-deb -e "$debfile" "$ctl"
        for f in symbols shlibs; do
            [ -f "$ctl/$f" ] && cp "$ctl/$f" "$db/info/$name.$f"
        done
        rm -rf "$ctl"
    done
    rm -f "$root"/var/cache/apt/archives/*.deb
}

toolchain() {
    local arch=$1 suite=$2
    case "$arch" in
    x86_64 | amd64) triple=x86_64-unknown-linux-gnu gnu=x86_64-linux-gnu deb=amd64 qemu="" qemu_cpu="" kernel_cpus="" ;;
    aarch64 | arm64) triple=aarch64-unknown-linux-gnu gnu=aarch64-linux-gnu deb=arm64 qemu=qemu-aarch64 qemu_cpu=cortex-a76 kernel_cpus="cortex-a76 cortex-a72" ;;
    armv7 | armhf) triple=armv7-unknown-linux-gnueabihf gnu=arm-linux-gnueabihf deb=armhf qemu=qemu-arm qemu_cpu=max kernel_cpus="cortex-a7" ;;
    *) echo "toolchain: unknown architecture $arch (x86_64, aarch64 or armv7)" >&2; return 2 ;;
    esac
    toolchain_tools
    rustup target add "$triple" >/dev/null 2>&1 || rustup target add "$triple"
    sysroot="$CARGO_TARGET_DIR/cross/sysroot-$suite-$deb"
    if [ ! -f "$sysroot/.complete" ]; then
        echo "toolchain: extracting a $suite $deb sysroot into $sysroot"
        rm -rf "$sysroot"
        mkdir -p "$(dirname "$sysroot")"
        mmdebstrap --quiet --arch="$deb" --variant=extract --skip=cleanup/apt/cache \
            --include=libc6-dev,libsystemd-dev,linux-libc-dev,libgcc-s1 \
            "$suite" "$sysroot" http://deb.debian.org/debian
        toolchain_relink "$sysroot"
        toolchain_dpkg_db "$sysroot"
        touch "$sysroot/.complete"
    fi
    local T t cc libdirs
    T="$(tr 'a-z-' 'A-Z_' <<<"$triple")"
    t="${triple//-/_}"
    cc="$gnu-gcc"
    [ "$deb" = amd64 ] && cc=gcc
    libdirs="$sysroot/usr/lib/$gnu:$sysroot/lib/$gnu"
    # x86_64 links with the host's gcc, the default: naming it would reach
    # the build scripts too (as RUSTFLAGS below explains).
    if [ "$deb" = amd64 ]; then
        unset "CARGO_TARGET_${T}_LINKER"
    else
        export "CARGO_TARGET_${T}_LINKER=$cc"
    fi
    # -B and the -L in front: gcc's own start files (crt1.o) and library
    # folders would otherwise come first, and they are the host's or the
    # cross toolchain's (bookworm's glibc), not the sysroot's.
    # RUSTFLAGS and not CARGO_TARGET_<T>_RUSTFLAGS: with --target (which every
    # build here passes) RUSTFLAGS reaches the target's crates only, while
    # the x86_64 target's own variable would reach the build scripts and
    # proc macros as well, and their fingerprints would then differ between
    # the amd64 and the ARM builds, each rebuilding the whole tree.
    local link="--sysroot=$sysroot -B$sysroot/usr/lib/$gnu -L$sysroot/usr/lib/$gnu -L$sysroot/lib/$gnu -Wl,-rpath-link,$libdirs"
    RUSTFLAGS="$(printf -- '-C link-arg=%s ' $link)"
    export RUSTFLAGS
    export "CC_${t}=$cc" "CFLAGS_${t}=--sysroot=$sysroot"
    export "PKG_CONFIG_SYSROOT_DIR_${t}=$sysroot" "PKG_CONFIG_LIBDIR_${t}=$sysroot/usr/lib/$gnu/pkgconfig:$sysroot/usr/share/pkgconfig"
    export "BINDGEN_EXTRA_CLANG_ARGS_${t}=--target=$gnu --sysroot=$sysroot"
    emulator="${qemu:+$qemu -cpu $qemu_cpu -L $sysroot}"
    if [ -n "$qemu" ]; then
        export "CARGO_TARGET_${T}_RUNNER=$emulator"
    else
        unset "CARGO_TARGET_${T}_RUNNER"
    fi
}
