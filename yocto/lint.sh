#!/usr/bin/env bash
# Lints meta-fusiond with oelint-adv (from the test venv) and checks that the
# lint can fail: a deliberately broken copy of the fusiond recipe must be
# reported. Also checks fusiond-crates.inc against Cargo.lock.
#   yocto/lint.sh     (FUSIOND_PYTHON: the venv's python, as tests/setup.sh sets)
set -euo pipefail
cd "$(dirname "$0")/.."
oelint="$(dirname "${FUSIOND_PYTHON:-$HOME/.cache/fusiond-venv/bin/python}")/oelint-adv"
[ -x "$oelint" ] || { echo "error: $oelint is missing; run tests/setup.sh (it installs oelint-adv)" >&2; exit 1; }
lint() { "$oelint" --release scarthgap --suppress oelint.vars.homepageping --quiet "$@"; }

python3 yocto/update-crates.py --check
mapfile -t recipes < <(find yocto/meta-fusiond -name '*.bb' -o -name '*.bbappend' -o -name '*.inc' | sort)
out="$(lint "${recipes[@]}" 2>&1)" || { echo "$out"; echo "oelint-adv: meta-fusiond is not clean" >&2; exit 1; }
[ -z "$out" ] || { echo "$out"; echo "oelint-adv: meta-fusiond is not clean" >&2; exit 1; }
echo "oelint-adv: ${#recipes[@]} files clean (${recipes[*]##*/})"

# The broken copy: no LICENSE, and DEPENDS overwritten after the inherit.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r yocto/meta-fusiond/recipes-fusiond/fusiond "$tmp/"
broken="$tmp/fusiond/fusiond_0.1.0.bb"
sed -i '/^LICENSE = /d' "$broken"
echo 'DEPENDS = "systemd"' >>"$broken"
if out="$(lint "$broken" 2>&1)" && [ -z "$out" ]; then
    echo "oelint-adv passed a recipe without LICENSE: the lint check does not work" >&2
    exit 1
fi
for rule in oelint.var.mandatoryvar.LICENSE oelint.vars.dependsappend; do
    grep -q "$rule" <<<"$out" || { echo "$out"; echo "the broken recipe was not reported for $rule" >&2; exit 1; }
done
echo "oelint-adv: the deliberately broken recipe is reported (missing LICENSE, DEPENDS overwritten)"
