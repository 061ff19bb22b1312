#!/usr/bin/env bash
# Lints meta-fusiond with oelint-adv (from the test venv) and checks that the
# lint can fail: a deliberately broken copy of the fusiond recipe must be
# reported. Also checks fusiond-crates.inc against Cargo.lock, and that the
# recipe's SRCREV builds HEAD's tree (yocto/update-crates.py --pin after a
# change), and that a recipe pinned to an older tree is refused.
#   yocto/lint.sh     (FUSIOND_PYTHON: the venv's python, as tests/setup.sh sets)
set -euo pipefail
cd "$(dirname "$0")/.."
oelint="$(dirname "${FUSIOND_PYTHON:-$HOME/.cache/fusiond-venv/bin/python}")/oelint-adv"
[ -x "$oelint" ] || { echo "error: $oelint is missing; run tests/setup.sh (it installs oelint-adv)" >&2; exit 1; }
lint() { "$oelint" --release wrynose --suppress oelint.vars.homepageping --quiet "$@"; }

python3 yocto/update-crates.py --check
mapfile -t recipes < <(find yocto/meta-fusiond -name '*.bb' -o -name '*.bbappend' -o -name '*.inc' | sort)
out="$(lint "${recipes[@]}" 2>&1)" || { echo "$out"; echo "oelint-adv: meta-fusiond is not clean" >&2; exit 1; }
[ -z "$out" ] || { echo "$out"; echo "oelint-adv: meta-fusiond is not clean" >&2; exit 1; }
echo "oelint-adv: ${#recipes[@]} files clean (${recipes[*]##*/})"

# The broken copy: no LICENSE, and DEPENDS overwritten after the inherit.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r yocto/meta-fusiond/recipes-fusiond/fusiond "$tmp/"
broken="$(echo "$tmp"/fusiond/fusiond_*.bb)"
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

# An old pin: the first commit's tree, which differs in src/ from HEAD's; a
# shallow clone has no history, so there the recorded input hash is altered.
recipe="$(echo yocto/meta-fusiond/recipes-fusiond/fusiond/fusiond_*.bb)"
old="$tmp/fusiond_old.bb"
if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
    what="a recipe whose input hash is not HEAD's (shallow clone)"
    sed "s/^# fusiond-inputs: .*/# fusiond-inputs: $(printf '0%.0s' {1..64})/" "$recipe" >"$old"
else
    first="$(git rev-list --max-parents=0 HEAD | tail -n 1)"
    what="a recipe pinned to the first commit (${first:0:12})"
    sed "s/^SRCREV = .*/SRCREV = \"$first\"/" "$recipe" >"$old"
fi
if out="$(python3 yocto/update-crates.py --check --recipe "$old" 2>&1)"; then
    echo "$out"; echo "update-crates.py --check passed $what: the pin check does not work" >&2
    exit 1
fi
grep -q "builds an older tree" <<<"$out" || { echo "$out"; echo "the old pin was refused for the wrong reason" >&2; exit 1; }
echo "pin check: $what is refused as an older tree"
