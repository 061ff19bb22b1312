#!/usr/bin/env bash
# Builds fusiond's Debian packages: fusiond_<version>_<arch>.deb for amd64,
# arm64 and armhf, from the edge build (the release profile, with the `ort`
# engine, which loads ONNX Runtime only when configured) linked against a
# Debian bullseye sysroot, so the binaries need glibc 2.31 at most: JetPack 5
# (Ubuntu 20.04), JetPack 6 (22.04), Debian 11 and 12.
#
#   debian/build.sh [amd64|arm64|armhf]...   (default: all three)
#   debian/build.sh --version                 prints the Debian version only
#   FUSIOND_DEB_VERSION   the Debian version (default: Cargo.toml's version, then -1)
#   FUSIOND_DEB_OUT       where the packages go (default: $CARGO_TARGET_DIR/deb)
#   FUSIOND_DEB_NO_BUILD  1: package the binary already built for each target
#
# Prints `deb: <file> <bytes> bytes, Depends: …` for each package. The
# dependencies are dpkg-shlibdeps' reading of the binary against the
# sysroot's own libraries and symbols files (tests/cross/toolchain.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/fusiond-target}"
. tests/cross/toolchain.sh

upstream=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
version="${FUSIOND_DEB_VERSION:-$upstream-1}"
[ "${1:-}" = --version ] && { echo "$version"; exit 0; }
arches=("$@")
((${#arches[@]})) || arches=(amd64 arm64 armhf)
out="${FUSIOND_DEB_OUT:-$CARGO_TARGET_DIR/deb}"
mkdir -p "$out"
# Reproducible: every date and mtime is the last commit's.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
command -v help2man >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends help2man >/dev/null

# The package's files, laid out under $1 for the binary $2.
lay_out() {
    local root=$1 bin=$2 doc="$1/usr/share/doc/fusiond"
    install -D -m 0755 "$bin" "$root/usr/bin/fusiond"
    install -D -m 0644 -t "$root/usr/lib/systemd/system" systemd/fusiond.service systemd/fusiond-stage.service
    install -D -m 0644 systemd/fusiond.sysusers "$root/usr/lib/sysusers.d/fusiond.conf"
    install -D -m 0644 systemd/fusiond.tmpfiles "$root/usr/lib/tmpfiles.d/fusiond.conf"
    install -D -m 0644 config/fusiond.toml "$root/etc/fusiond/fusiond.toml"
    install -d -m 0755 "$root/etc/fusiond/conf.d"
    install -D -m 0644 -t "$doc" debian/copyright debian/README.Debian README.md docs/*.md
    install -D -m 0644 -t "$doc/examples" systemd/fusiond-gpu.conf systemd/fusiond-stage-verify.conf
    install -D -m 0644 debian/lintian-overrides "$root/usr/share/lintian/overrides/fusiond"
    changelog | gzip -9n >"$doc/changelog.Debian.gz"
    mkdir -p "$root/usr/share/man/man1"
    # The manual page is the binary's own --help (under qemu off x86_64).
    help2man --no-info --version-string="$upstream" --name="live face fusion daemon for edge boxes" \
        --section=1 --source="fusiond $upstream" \
        "$(runner_script "$root/usr/bin/fusiond")" | gzip -9n >"$root/usr/share/man/man1/fusiond.1.gz"
}

# help2man runs a program by name: a wrapper that runs the target's binary.
runner_script() {
    local wrapper="$work/fusiond"
    printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$emulator" "$1" >"$wrapper"
    chmod 0755 "$wrapper"
    echo "$wrapper"
}

changelog() {
    printf 'fusiond (%s) unstable; urgency=medium\n\n  * Build of %s.\n\n -- fusiond developers <fusiond@packages.example.org>  %s\n' \
        "$version" "$(git rev-parse --short HEAD 2>/dev/null || echo "the working tree")" \
        "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
}

control() {
    local depends=$1 size=$2
    cat <<EOF
Package: fusiond
Version: $version
Architecture: $deb
Maintainer: fusiond developers <fusiond@packages.example.org>
Installed-Size: $size
Depends: $depends, systemd, init-system-helpers (>= 1.54~)
Recommends: mosquitto
Suggests: v4l2loopback-dkms, libonnxruntime1.21
Section: video
Priority: optional
Homepage: https://github.com/fusiond/fusiond
Description: live face fusion daemon for edge boxes
 fusiond swaps faces live on a V4L2 camera stream: detection, landmarks,
 tracking, ArcFace identity and FaceFusion's swapper contracts, on tract
 (pure Rust) or on ONNX Runtime with CUDA or TensorRT when the box has it.
 It publishes frames, faces, stats and events over MQTT with Home
 Assistant discovery, serves a live page, an MJPEG stream, an API and
 Prometheus metrics over HTTP, and writes a V4L2 virtual camera.
 .
 The models are not included: put them in /var/lib/fusiond/models
 (README.Debian).
EOF
}

package() {
    local bin=$1 root="$work/root" shl="$work/shlibdeps" depends file
    rm -rf "$root" "$shl"
    lay_out "$root" "$bin"
    # dpkg-shlibdeps wants a debian/control where it runs.
    mkdir -p "$shl/debian"
    : >"$shl/debian/control"
    depends=$(cd "$shl" && DEB_HOST_ARCH=$deb dpkg-shlibdeps --admindir="$sysroot/var/lib/dpkg" \
        -l"$sysroot/lib/$gnu" -l"$sysroot/usr/lib/$gnu" -O -e"$root/usr/bin/fusiond" 2>"$shl/warnings" |
        sed -n 's/^shlibs:Depends=//p')
    [ -n "$depends" ] || { cat "$shl/warnings" >&2; echo "deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
    mkdir -p "$root/DEBIAN"
    install -m 0755 -t "$root/DEBIAN" debian/postinst debian/prerm debian/postrm
    echo /etc/fusiond/fusiond.toml >"$root/DEBIAN/conffiles"
    (cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
    control "$depends" "$(du -sk --exclude=DEBIAN "$root" | cut -f1)" >"$root/DEBIAN/control"
    find "$root" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    file="$out/fusiond_${version}_$deb.deb"
    dpkg-deb --root-owner-group -Zxz --build "$root" "$file" >/dev/null
    echo "deb: $file $(stat -c %s "$file") bytes, Depends: $(dpkg-deb -f "$file" Depends)"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for arch in "${arches[@]}"; do
    toolchain "$arch" bullseye
    if [ "${FUSIOND_DEB_NO_BUILD:-0}" != 1 ]; then
        start=$SECONDS
        # Without SOURCE_DATE_EPOCH: the cc crate reruns ring's and
        # tract-linalg's build scripts when it changes, and every crate
        # above them is rebuilt, so a value per commit would rebuild tract
        # on every run. The ARM cost model's build of the same binary
        # (benches/arm-cost.sh) runs without it too, and finds this one fresh.
        env -u SOURCE_DATE_EPOCH cargo build --release --target "$triple" --features ort --bin fusiond --quiet
        echo "deb: $triple release build in $((SECONDS - start)) s"
    fi
    package "$CARGO_TARGET_DIR/$triple/release/fusiond"
done
