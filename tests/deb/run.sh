#!/usr/bin/env bash
# Checks fusiond's Debian packages, built by debian/build.sh:
#   - lintian: no errors and no warnings beyond debian/lintian-overrides;
#   - the files are the ones docs/install.md lists (the same on every architecture),
#     and the control fields are the same but for the architecture, the
#     installed size and the dependencies' versions;
#   - the binary is the architecture's ELF and needs glibc 2.31 at most;
#   - it runs `fusiond --version` and one `detect` on a real photo against
#     the bullseye sysroot it was built for (under qemu-user off x86_64; on
#     x86_64 through bullseye's own dynamic loader and libraries).
#
#   tests/deb/run.sh [amd64|arm64|armhf]...   (default: all three)
#   FUSIOND_DEB_NO_BUILD=1                     check the packages already built
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/setup.sh >/dev/null
. tests/cross/toolchain.sh
command -v lintian >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lintian >/dev/null
arches=("$@")
((${#arches[@]})) || arches=(amd64 arm64 armhf)
shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
out="${FUSIOND_DEB_OUT:-$CARGO_TARGET_DIR/deb}"
export FUSIOND_DEB_OUT="$out"
version=$(bash debian/build.sh --version)
glibc_floor=2.31

fail() { echo "deb: FAILED: $*" >&2; exit 1; }
# The highest GLIBC_ symbol version the ELF file $2 needs ($1: its objdump).
glibc_needed() {
    "$1" -T "$2" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -1
}
# The control members (maintainer scripts, conffiles, md5sums), then the
# fields with the architecture-dependent values masked.
control_layout() {
    dpkg-deb -I "$1" | awk '/ bytes, +[0-9]+ lines/ { print "member:", ($5 == "*" ? $6 " (executable)" : $5) }'
    dpkg-deb -f "$1" | sed -e 's/^Architecture: .*/Architecture: */' -e 's/^Installed-Size: .*/Installed-Size: */' \
        -e '/^Depends:/s/ ([^)]*)//g'
}
above_floor() { [ "$(printf '%s\n%s\n' "$1" "$glibc_floor" | sort -V | tail -1)" != "$glibc_floor" ]; }
# The floor check can fail: this machine's own bookworm binaries need more.
host_floor=$(glibc_needed objdump "$(command -v ls)")
above_floor "$host_floor" || fail "the glibc check passes the host's ls (GLIBC_$host_floor): it cannot tell"
bash debian/build.sh "${arches[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# docs/install.md's list of the package's files, between its dpkg-L markers.
sed -n '/<!-- dpkg -L fusiond -->/,/<!-- end -->/p' docs/install.md | grep '^/' | sort >"$work/readme.list"
[ -s "$work/readme.list" ] || fail "docs/install.md has no file list between <!-- dpkg -L fusiond --> and <!-- end -->"

for arch in "${arches[@]}"; do
    toolchain "$arch" bullseye >/dev/null
    deb_file="$out/fusiond_${version}_$deb.deb"
    [ -f "$deb_file" ] || fail "$deb_file was not built"

    lintian --fail-on error,warning --no-tag-display-limit "$deb_file" >"$work/lintian.$deb" 2>&1 ||
        { cat "$work/lintian.$deb" >&2; fail "lintian on $deb_file"; }
    overridden=$(lintian --show-overrides "$deb_file" 2>/dev/null | grep -c '^O:' || true)
    echo "deb: lintian $deb: no errors or warnings ($overridden overridden, each in debian/lintian-overrides with its reason)"

    dpkg-deb --contents "$deb_file" | awk '{ print $6 }' | sed 's|^\./|/|' | grep -v '/$' | sort >"$work/contents.$deb"
    diff -u "$work/readme.list" "$work/contents.$deb" >&2 || fail "$deb's files differ from docs/install.md's list (above)"
    dpkg-deb --contents "$deb_file" | awk '{ print $6 }' | grep -qx './etc/fusiond/conf.d/' || fail "$deb has no /etc/fusiond/conf.d/"
    if [ "$deb" != amd64 ]; then
        amd64_file="$out/fusiond_${version}_amd64.deb"
        [ -f "$amd64_file" ] || fail "$amd64_file is missing: the other packages are compared with it (tests/deb/run.sh amd64)"
        control_layout "$amd64_file" >"$work/fields.amd64"
        control_layout "$deb_file" >"$work/fields.$deb"
        diff -u "$work/fields.amd64" "$work/fields.$deb" >&2 || fail "$deb's control members or fields differ from amd64's (above)"
    fi
    echo "deb: $deb layout: $(wc -l <"$work/contents.$deb") files as docs/install.md lists${amd64_file:+, control members and fields as in amd64}; $(dpkg-deb -f "$deb_file" Depends)"

    root="$work/root.$deb"
    dpkg-deb -x "$deb_file" "$root"
    bin="$root/usr/bin/fusiond"
    case "$deb" in
    amd64) elf="ELF 64-bit LSB pie executable, x86-64" ;;
    arm64) elf="ELF 64-bit LSB pie executable, ARM aarch64" ;;
    armhf) elf="ELF 32-bit LSB pie executable, ARM, EABI5" ;;
    esac
    kind=$(file -b "$bin")
    [[ "$kind" == "$elf"* ]] || fail "$deb's binary is \"$kind\", not \"$elf\""
    floor=$(glibc_needed "$gnu-objdump" "$bin")
    above_floor "$floor" && fail "$deb's binary needs glibc $floor (GLIBC_$floor symbols); the fleet's floor is $glibc_floor"
    echo "deb: $deb binary: ${kind%%, BuildID*}; glibc floor $floor (<= $glibc_floor; the host's ls needs $host_floor)"

    if [ -n "$qemu" ]; then
        read -ra run <<<"$emulator $bin"
    else
        run=("$sysroot/lib64/ld-linux-x86-64.so.2" --library-path "$sysroot/lib/$gnu:$sysroot/usr/lib/$gnu" "$bin")
    fi
    start=$SECONDS
    got=$("${run[@]}" --version)
    [[ "$got" == "fusiond "* ]] || fail "$deb: fusiond --version printed \"$got\""
    faces=$("${run[@]}" detect "$shared/images/fr_two_people.jpg" --models "$shared/models" --detector scrfd_500m --json |
        python3 -c 'import json, sys; print(len(json.load(sys.stdin)["faces"]))')
    [ "$faces" = 2 ] || fail "$deb: detect found $faces faces in fr_two_people.jpg, want 2"
    echo "deb: $deb on bullseye's glibc${qemu:+ under $qemu}: \`$got\`, detect: 2 faces in fr_two_people.jpg ($((SECONDS - start)) s)"
done
echo "deb: ok"
