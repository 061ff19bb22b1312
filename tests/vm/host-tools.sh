#!/usr/bin/env bash
# Host tools for the VM boot test: mmdebstrap and e2fsprogs from bookworm,
# qemu-system-x86 from bookworm-backports (matching the machine's qemu-utils)
# through a temporary sources list for that one apt call; /etc/apt is never
# edited. Every install waits for dpkg's lock (the ARM packages' toolchain
# may be installing beside it: tests/run.sh runs the two side by side).
set -euo pipefail
need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v mke2fs >/dev/null || need+=(e2fsprogs)
command -v zstd >/dev/null || need+=(zstd)
if ((${#need[@]})); then
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! command -v qemu-system-x86_64 >/dev/null; then
    tmp=$(mktemp -d)
    echo "deb http://deb.debian.org/debian bookworm-backports main" > "$tmp/backports.list"
    mkdir -p "$tmp/lists/partial"
    chmod -R a+rwx "$tmp"
    # Resolve against both bookworm (already indexed) and backports.
    DEBIAN_FRONTEND=noninteractive apt-get -o "Dir::Etc::SourceParts=/etc/apt/sources.list.d" \
        -o "Dir::Etc::SourceList=$tmp/backports.list" -o "Dir::State::Lists=$tmp/lists" update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o "Dir::Etc::SourceParts=/etc/apt/sources.list.d" \
        -o "Dir::Etc::SourceList=$tmp/backports.list" -o "Dir::State::Lists=$tmp/lists" \
        -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86 >/dev/null
    rm -rf "$tmp"
fi
echo "vm host tools: $(qemu-system-x86_64 --version | head -1)"
