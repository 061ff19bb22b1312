#!/usr/bin/env bash
# README's first command: sets up, builds fusiond (release) and runs the live
# daemon end to end on its built-in defaults: no camera here, so it plays the
# sample frames in ../shared/camera/two_people_pan; the broker is a real
# mosquitto that this script starts on a free loopback port (the box's own
# broker, as on a real box). A mosquitto_sub watches for DEMO_SECONDS
# (default 20) and the daemon and mosquitto are then stopped cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/setup.sh

shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
out="${FUSIOND_OUT:-/tmp/fusiond-demo}"
free_port() { "$FUSIOND_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port="${FUSIOND_DEMO_PORT:-$(free_port)}"
http_port="${FUSIOND_DEMO_HTTP_PORT:-$(free_port)}"
seconds="${DEMO_SECONDS:-20}"
[ -d "$shared/models" ] || { echo "error: $shared/models is missing; set FUSIOND_SHARED to the shared/ folder" >&2; exit 1; }
mkdir -p "$out/etc/conf.d" "$out/state"

echo "== cargo build --release (the first build takes 20-30 minutes on two cores: tract, then one LTO link; later ones reuse $CARGO_TARGET_DIR)"
built=$SECONDS
cargo build --release
echo "== built in $((SECONDS - built)) s"
bin="$CARGO_TARGET_DIR/release/fusiond"
"$FUSIOND_PYTHON" models/make_contract_models.py "$out/models" >/dev/null

# The packaged config, plus a drop-in naming this checkout's model folders.
# FaceFusion's inswapper_128 cannot be downloaded here, so the tier swaps with
# latent_color_swapper: a generated model with inswapper's exact I/O contract
# whose output colour follows the source identity. Put inswapper_128.onnx in
# a models folder and name it in the tier to swap for real.
cp config/fusiond.toml "$out/etc/fusiond.toml"
cat > "$out/etc/conf.d/50-demo.toml" <<TOML
[models]
dirs = ["$shared/models", "$out/models"]
ramdisk = "$out/ramdisk"

[[tier]]
name = "fast"
models = ["yunet_2023mar", "arcface_fr", "latent_color_swapper"]

[camera]
samples = ["$shared/camera/two_people_pan"]

[mqtt]
port = $port
device_id = "demo"

[pipeline]
source = "$shared/images/fr_biden.jpg"
state_dir = "$out/state"

[output]
stats_interval_s = 5

[http]
listen = "127.0.0.1:$http_port"
TOML

printf 'user root\npersistence false\nlistener %s 127.0.0.1\nallow_anonymous true\n' "$port" >"$out/mosquitto.conf"
echo "== mosquitto -c $out/mosquitto.conf (127.0.0.1:$port)"
mosquitto -c "$out/mosquitto.conf" 2>"$out/mosquitto.log" &
broker=$!
trap 'kill $broker 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 $broker 2>/dev/null || { cat "$out/mosquitto.log"; exit 1; }
    sleep 0.1
done

echo "== fusiond run --config $out/etc/fusiond.toml (log: $out/fusiond.log)"
"$bin" run --config "$out/etc/fusiond.toml" 2>"$out/fusiond.log" &
daemon=$!
trap 'kill $daemon $broker 2>/dev/null || true' EXIT
ready=0
for _ in $(seq 300); do
    grep -q "ready:" "$out/fusiond.log" 2>/dev/null && { ready=1; break; }
    kill -0 $daemon 2>/dev/null || { cat "$out/fusiond.log"; echo "demo: the daemon exited before it was ready" >&2; exit 1; }
    sleep 0.1
done
if [ "$ready" != 1 ]; then
    cat "$out/fusiond.log"
    echo "demo: the daemon was not ready after 30 s (its log is above)" >&2
    exit 1
fi
sed 's/^/   daemon: /' "$out/fusiond.log"
echo "== live page: http://127.0.0.1:$http_port/ (stream /stream.mjpeg, state /api/state, health /api/health, metrics /metrics)"

echo "== mosquitto_sub -h 127.0.0.1 -p $port -t 'fusiond/demo/#' -v (for ${seconds}s; frames summarised)"
mosquitto_sub -h 127.0.0.1 -p $port -C 1 -t fusiond/demo/frame > "$out/frame.jpg" &
timeout "$seconds" mosquitto_sub -h 127.0.0.1 -p "$port" -v \
    -t 'fusiond/demo/available' -t 'fusiond/demo/+/state' -t 'fusiond/demo/events' \
    -t 'fusiond/demo/stats' -t 'fusiond/demo/faces' -t 'fusiond/demo/error' |
    awk '$1 ~ /faces$/ { if (n++ % 25) next } { print "   " substr($0, 1, 400) }' || true

echo "== curl http://127.0.0.1:$http_port/api/health"
curl -s "http://127.0.0.1:$http_port/api/health" | sed 's/^/   /'; echo
echo "== snapshot command, then SIGTERM"
mosquitto_sub -h 127.0.0.1 -p "$port" -C 1 -t fusiond/demo/snapshot > "$out/snapshot.jpg" &
sleep 0.5
mosquitto_pub -h 127.0.0.1 -p "$port" -t fusiond/demo/snapshot/set -m PRESS
sleep 2
kill -TERM $daemon
if wait $daemon; then
    echo "   daemon exited cleanly"
else
    status=$?
    echo "demo: the daemon exited with status $status on SIGTERM (log: $out/fusiond.log)" >&2
    exit 1
fi
kill $broker 2>/dev/null || true
trap - EXIT
echo "demo: fused frame $out/frame.jpg, snapshot $out/snapshot.jpg, log $out/fusiond.log"
