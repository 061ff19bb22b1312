#!/usr/bin/env bash
# The soak under faults, a benchmark rather than a test: runs the daemon on
# the sample feed with a real mosquitto for DURATION while tests/soak.py
# restarts the broker, unplugs the camera, sends SIGHUP and floods of valid
# and hostile commands, and fills the model tmpfs once; it prints RSS over
# time, fps, drops, commands sent against answered and reconnect times, and
# exits 1 when a goal is missed.
#
#   tests/soak.sh DURATION      e.g. 1h, 90m, 2m or 300 (seconds)
#   FUSIOND_BIN                 the binary (default: a dev build, cargo build)
#   SOAK_STALL=S                stall the worker at second S (debug.stall_command):
#                               the soak must then fail, which CI checks
#
# Needs root (it mounts a tmpfs for the models). The test suite runs 2m.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: tests/soak.sh DURATION (1h, 90m, 2m, or seconds)" >&2; exit 2; }
case "$1" in
    *h) seconds=$(("${1%h}" * 3600)) ;;
    *m) seconds=$(("${1%m}" * 60)) ;;
    *[!0-9]* | "") echo "error: DURATION is a whole number of seconds, or ends in m or h: $1" >&2; exit 2 ;;
    *) seconds=$1 ;;
esac
((seconds >= 60)) || { echo "error: a soak lasts at least 60 s (warm-up 30 s)" >&2; exit 2; }
. tests/setup.sh >/dev/null
shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
[ -d "$shared/models" ] || { echo "error: $shared/models is missing; set FUSIOND_SHARED to the shared/ folder" >&2; exit 1; }
if [ -z "${FUSIOND_BIN:-}" ]; then
    cargo build --quiet
    FUSIOND_BIN="$CARGO_TARGET_DIR/debug/fusiond"
fi

work="$(mktemp -d)"
# The daemon's log is kept in $SOAK_LOG (default /tmp/fusiond-soak.log).
cleanup() {
    cp "$work/fusiond.log" "${SOAK_LOG:-/tmp/fusiond-soak.log}" 2>/dev/null || true
    umount "$work/ramdisk" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/etc/conf.d" "$work/state" "$work/ramdisk"
# A real tmpfs, small enough to fill in a moment: the tier's models take 5 MB.
mount -t tmpfs -o size=24m fusiond-soak "$work/ramdisk"
"$FUSIOND_PYTHON" models/make_contract_models.py "$work/models" >/dev/null
port="$("$FUSIOND_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cp config/fusiond.toml "$work/etc/fusiond.toml"
cat >"$work/etc/conf.d/50-soak.toml" <<TOML
[models]
dirs = ["$shared/models", "$work/models"]
ramdisk = "$work/ramdisk"

[[tier]]
name = "fast"
models = ["yunet_2023mar", "arcface_fr", "latent_color_swapper"]

[camera]
source = "sequence"
samples = ["$shared/camera/two_people_pan"]

[mqtt]
port = $port
device_id = "soak"

[pipeline]
source = "$shared/images/fr_biden.jpg"
state_dir = "$work/state"

[output]
stats_interval_s = 5

[debug]
stall_command = true
TOML
printf 'user root\npersistence false\nlistener %s 127.0.0.1\nallow_anonymous true\n' "$port" >"$work/mosquitto.conf"
echo "== soak: $FUSIOND_BIN stage (into the tmpfs, as fusiond-stage.service does at boot)"
"$FUSIOND_BIN" stage --config "$work/etc/fusiond.toml" 2>&1 | tail -n 2 | sed 's/^/   /'
echo "== soak: $FUSIOND_BIN for ${seconds}s (broker 127.0.0.1:$port, log $work/fusiond.log)"
rc=0
"$FUSIOND_PYTHON" tests/soak.py --seconds "$seconds" --port "$port" --daemon "$FUSIOND_BIN" \
    --config "$work/etc/fusiond.toml" --log "$work/fusiond.log" --mosquitto-conf "$work/mosquitto.conf" \
    --mosquitto-log "$work/mosquitto.log" --shared "$shared" --ramdisk "$work/ramdisk" \
    --stall-at "${SOAK_STALL:-0}" || rc=$?
if ((rc)); then
    echo "== soak: the daemon's log (last 40 lines)"
    tail -n 40 "$work/fusiond.log"
fi
exit $rc
