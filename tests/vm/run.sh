#!/usr/bin/env bash
# Boot acceptance test: a Debian bookworm guest with systemd, udev, the vivid
# V4L2 driver, v4l2loopback (built by dkms into the image) and mosquitto, with
# fusiond's amd64 package installed by apt, boots fusiond from its units
# (stage → daemon) on qemu (TCG), and the host checks it over MQTT and a 9p
# command channel, including the V4L2 output; then the package is purged,
# its previous version installed and upgraded, removed and purged again
# (tests/vm/package.sh).
# Under TCG one detection takes about 9 s, so the guest's WatchdogSec is 60
# (VM_WATCHDOG_S). The guest CPU has no AVX, AVX2 or FMA: tract picks its
# kernels at run time, and TCG emulates the FMA ones element by element,
# 8-9 times slower than tract's SSE kernels (qemu-x86_64 -cpu max against
# -cpu max,-avx,-avx2,-fma, one YuNet detection: 113 s against 13 s).
# VM_STEPS=package runs only the package's checks: the install, then its
# upgrade and removal.
#
#   base image   mmdebstrap, cached in $CARGO_TARGET_DIR/vm keyed by the
#                package list (about 3 minutes the first time)
#   disk         mke2fs -d from the base, the models, a conf.d fragment and the
#                package apt installed in a chroot (no loop mount)
#   guest        -accel tcg (the machine's /dev/kvm does not boot a stock kernel)
#   channel      hostfwd 127.0.0.1:$PORT → guest 1883; 9p share `share` where a
#                guest agent runs cmd/*.sh and leaves *.out and *.rc
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/setup.sh >/dev/null
bash tests/vm/host-tools.sh

shared="${FUSIOND_SHARED:-$(cd .. && pwd)/shared}"
work="$CARGO_TARGET_DIR/vm"
mkdir -p "$work"
pkgs="systemd systemd-sysv udev dbus kmod linux-image-amd64 initramfs-tools mosquitto v4l-utils iproute2 procps"
# dkms builds v4l2loopback against the image's kernel while mmdebstrap runs.
pkgs="$pkgs linux-headers-amd64 v4l2loopback-dkms"
base="$work/base-$(echo "$pkgs" | sha256sum | cut -c1-12).tar.zst"
if [ ! -f "$base" ]; then
    echo "vm: building the base image ($base)"
    (cd /tmp && mmdebstrap --quiet --variant=apt --include="${pkgs// /,}" bookworm "$base.partial.tar.zst")
    mv "$base.partial.tar.zst" "$base"
fi

# The packages: this build's (tests/deb/run.sh amd64 made it) and the
# previous version, the same build repackaged one version lower, for the
# upgrade test (tests/vm/package.sh).
version=$(bash debian/build.sh --version)
deb_new="${FUSIOND_DEB_OUT:-$CARGO_TARGET_DIR/deb}/fusiond_${version}_amd64.deb"
[ -f "$deb_new" ] || { echo "vm: $deb_new is missing: run tests/deb/run.sh amd64 (or debian/build.sh amd64) first" >&2; exit 1; }
qemu_pid=""
run=$(mktemp -d "$work/run.XXXXXX")
trap 'kill "$qemu_pid" 2>/dev/null || true; umount "$run/rootfs/proc" 2>/dev/null || true; rm -rf "$run"' EXIT
root="$run/rootfs"
share="$run/share"
mkdir -p "$root" "$share/cmd"
version_old="$version~prev"
FUSIOND_DEB_NO_BUILD=1 FUSIOND_DEB_VERSION="$version_old" FUSIOND_DEB_OUT="$share" bash debian/build.sh amd64 | sed 's/^/vm: previous version: /'
cp "$deb_new" "$share/"
tar -C "$root" --zstd -xf "$base"
loopback=$(find "$root/lib/modules" -name 'v4l2loopback.ko*' | head -1)
[ -n "$loopback" ] || { echo "vm: the base image has no v4l2loopback module (dkms did not build it); delete $base" >&2; exit 1; }

# --- what an operator provisions before the package: models, and a conf.d
# fragment for this box ---
mkdir -p "$root/etc/fusiond/conf.d" "$root/var/lib/fusiond/models" "$root/var/lib/fusiond/contract"
cp "$shared/models/face_detection_yunet_2023mar.onnx" "$shared/models/arcface_fr_feature.onnx" "$root/var/lib/fusiond/models/"
"$FUSIOND_PYTHON" models/make_contract_models.py "$run/contract" >/dev/null
# latent_color_swapper paints each face with a colour of the source, so the
# output checks (tests/vm/drivers.sh) can tell a fused frame from the camera's.
cp "$run/contract/latent_color_swapper_128.onnx" "$run/contract/manifest.toml" "$root/var/lib/fusiond/contract/"
cat > "$root/etc/fusiond/conf.d/50-vm.toml" <<'TOML'
[models]
dirs = ["/var/lib/fusiond/models", "/var/lib/fusiond/contract"]
ramdisk_size_mib = 64

[[tier]]
name = "fast"
models = ["yunet_2023mar", "arcface_fr", "latent_color_swapper"]

[camera]
source = "v4l2"
device = "/dev/video0"

[mqtt]
host = "127.0.0.1"
device_id = "vm"

[output]
stats_interval_s = 5

# v4l2loopback is loaded only later by the test: the output starts missing.
[output.v4l2]
enabled = true
device = "/dev/video10"
reopen_max_ms = 2000

[debug]
stall_command = true
TOML
mkdir -p "$root/etc/systemd/system/fusiond.service.d"
# A clean stop drains the frame in flight, and under TCG a frame with two
# faces takes over 20 s (the unit's TimeoutStopSec; a box takes 0.1 s): the
# stop timeout is scaled with the watchdog, so that a stop in the test is
# clean (available `stopped`) as on a box, not a SIGKILL (`offline`).
printf '[Service]\nWatchdogSec=%s\nTimeoutStopSec=%s\n' "${VM_WATCHDOG_S:-60}" "${VM_WATCHDOG_S:-60}" \
    > "$root/etc/systemd/system/fusiond.service.d/50-vm-test.conf"

# --- the package, installed by apt in the image (its dependencies resolved
# against the image's packages; no network): the postinst makes the user
# and the directories and enables both units; no systemd runs here, so it
# starts nothing and the guest's boot starts the daemon ---
cp "$deb_new" "$root/tmp/"
mount -t proc proc "$root/proc"
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "/tmp/${deb_new##*/}" \
    > "$run/apt.log" 2>&1 || { cat "$run/apt.log" >&2; echo "vm: apt-get install of the package failed" >&2; exit 1; }
umount "$root/proc"
rm "$root/tmp/${deb_new##*/}"
echo "vm: installed in the image: $(grep -m1 -o 'Setting up fusiond ([^)]*)' "$run/apt.log")"

# --- the guest's own plumbing ---
echo vm > "$root/etc/hostname"
echo "/dev/vda / ext4 rw 0 1" > "$root/etc/fstab"
echo vivid > "$root/etc/modules-load.d/vivid.conf"
printf 'listener 1883 0.0.0.0\nallow_anonymous true\n' > "$root/etc/mosquitto/conf.d/vm.conf"
mkdir -p "$root/etc/systemd/network"
printf '[Match]\nName=en* eth*\n[Network]\nDHCP=yes\n' > "$root/etc/systemd/network/50-dhcp.network"
ln -sf /usr/lib/systemd/system/systemd-networkd.service "$root/etc/systemd/system/multi-user.target.wants/"
cat > "$root/usr/local/bin/vm-agent" <<'AGENT'
#!/bin/sh
# Runs the host's command files from the 9p share.
mkdir -p /mnt/share
until mountpoint -q /mnt/share; do
    mount -t 9p -o trans=virtio,version=9p2000.L share /mnt/share || sleep 1
done
while :; do
    for f in /mnt/share/cmd/*.sh; do
        [ -e "$f" ] || continue
        # The exit status appears whole (renamed into place): the host reads
        # it as soon as the file exists.
        sh "$f" > "$f.out" 2>&1; echo $? > "$f.rc.tmp"; mv "$f" "$f.done"; mv "$f.rc.tmp" "$f.rc"
    done
    sleep 0.3
done
AGENT
chmod 0755 "$root/usr/local/bin/vm-agent"
printf '[Unit]\nDescription=VM test agent\n[Service]\nExecStart=/usr/local/bin/vm-agent\nRestart=always\n[Install]\nWantedBy=multi-user.target\n' \
    > "$root/etc/systemd/system/vm-agent.service"
ln -sf /etc/systemd/system/vm-agent.service "$root/etc/systemd/system/multi-user.target.wants/"

kernel=$(ls "$root"/boot/vmlinuz-* | head -1)
initrd=$(ls "$root"/boot/initrd.img-* | head -1)
cp "$kernel" "$run/vmlinuz"
cp "$initrd" "$run/initrd"
mke2fs -q -t ext4 -d "$root" "$run/disk.ext4" 2G
rm -rf "$root"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# The image as built, for a second boot (below).
cp --sparse=always "$run/disk.ext4" "$run/disk.built"
boot() {
    boot_start=$(date +%s.%N)
    qemu-system-x86_64 -accel tcg,thread=multi -cpu max,-avx,-avx2,-fma -smp 2 -m 2048 -nographic -no-reboot \
        -kernel "$run/vmlinuz" -initrd "$run/initrd" -append "root=/dev/vda rw console=ttyS0 quiet" \
        -drive "file=$run/disk.ext4,format=raw,if=virtio" \
        -virtfs "local,path=$share,mount_tag=share,security_model=none,id=share" \
        -netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$port-:1883" -device virtio-net-pci,netdev=n0 \
        > "$run/console.log" 2>&1 &
    qemu_pid=$!
}
# True once the daemon reports available=online, false after $1 seconds.
online_within() {
    local until=$(($(date +%s) + $1))
    while (($(date +%s) < until)); do
        [ "$(sub -C 1 -W 3 -t fusiond/vm/available 2>/dev/null || true)" = online ] && return 0
        kill -0 "$qemu_pid" 2>/dev/null || return 1
        sleep 1
    done
    return 1
}
fail() {
    echo "vm: FAILED: $*" >&2
    echo "--- guest console (tail) ---" >&2
    tail -20 "$run/console.log" >&2 || true
    # The daemon's journal, when the agent still answers.
    if kill -0 "$qemu_pid" 2>/dev/null; then
        local f
        f="$share/cmd/diag-$(date +%s%N).sh"
        echo "journalctl -u fusiond -u fusiond-stage --no-pager -n 80; systemctl status fusiond --no-pager" > "$f"
        for _ in $(seq 60); do [ -e "$f.rc" ] && break; sleep 0.5; done
        echo "--- guest journal ---" >&2
        cat "$f.out" >&2 2>/dev/null || true
    fi
    exit 1
}
# Runs a shell command in the guest; prints its output; fails on non-zero.
guest() {
    # A unique name: guest runs in command substitutions (subshells) too.
    local f
    f="$share/cmd/$(date +%s%N).sh"
    printf '%s\n' "$1" > "$f.tmp" && mv "$f.tmp" "$f"
    for _ in $(seq 600); do
        [ -e "$f.rc" ] && break
        kill -0 "$qemu_pid" 2>/dev/null || fail "qemu exited"
        sleep 0.5
    done
    [ -e "$f.rc" ] || fail "guest did not run: $1"
    cat "$f.out"
    [ "$(cat "$f.rc")" = 0 ] || fail "guest command failed: $1"
}
sub() { mosquitto_sub -h 127.0.0.1 -p "$port" "$@"; }
. tests/vm/package.sh
wait_available() {
    for _ in $(seq 400); do
        [ "$(sub -C 1 -W 3 -t fusiond/vm/available 2>/dev/null || true)" = "$1" ] && return 0
        kill -0 "$qemu_pid" 2>/dev/null || fail "qemu exited"
        sleep 1
    done
    fail "available never became $1"
}

# Waits up to 120 s for systemd to have restarted the daemon exactly $1 times.
wait_restarts() {
    local restarts
    for _ in $(seq 120); do
        restarts=$(guest "systemctl show fusiond -p NRestarts")
        [ "$restarts" = "NRestarts=$1" ] && return 0
        sleep 1
    done
    fail "no restart within 120 s of $2: $restarts"
}
# The fields $2 (a regex of names) of the daemon's first journal record whose
# MESSAGE matches the awk regex $1.
journal_record() {
    guest "journalctl -u fusiond -o verbose --no-pager | awk '/^[^ ]/ { if (e ~ /MESSAGE=$1/) { print e; exit } e = \"\" } { e = e \"\\n\" \$0 }' | grep -E '^ *($2)='"
}

# The guest is online about a minute after qemu starts, with the ARM
# packages building beside it. Under that load a TCG guest has once hung
# in early boot (a vCPU's timer never fired: rcu_preempt stall messages, no
# systemd); such a boot is stopped after VM_BOOT_S, said so with its
# console, and the image as built is booted once more.
echo "vm: booting (tcg, 2 vCPUs), broker forwarded to 127.0.0.1:$port"
boot
if ! online_within "${VM_BOOT_S:-300}"; then
    echo "vm: not online ${VM_BOOT_S:-300} s after qemu started; its console ends:"
    tail -5 "$run/console.log" | tr -c '[:print:]\n' ' ' | sed 's/^/vm:   /'
    kill "$qemu_pid" 2>/dev/null || true
    wait "$qemu_pid" 2>/dev/null || true
    cp "$run/console.log" "$run/console-first-boot.log"
    cp --sparse=always "$run/disk.built" "$run/disk.ext4"
    echo "vm: booting the image as built once more"
    boot
    wait_available online
fi
rm -f "$run/disk.built"
ready_host=$(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $boot_start }")
echo "vm: available=online ${ready_host}s after qemu started"
package_installed
if [ "${VM_STEPS:-all}" = package ]; then
    package_lifecycle
    echo "vm: ok (VM_STEPS=package: the package's checks only)"
    exit 0
fi

for i in 1 2 3; do
    sub -C 1 -W 120 -t fusiond/vm/frame > "$run/frame$i.jpg" || fail "no frame $i on fusiond/vm/frame"
done
"$FUSIOND_PYTHON" - "$run" <<'PY'
import sys, cv2
for i in (1, 2, 3):
    img = cv2.imread(f"{sys.argv[1]}/frame{i}.jpg")
    assert img is not None, f"frame {i} is not a JPEG"
    assert img.shape[:2] == (480, 640), f"frame {i} is {img.shape}"
print("vm: 3 frames, valid 640x480 JPEGs")
PY
faces=$(sub -C 1 -W 120 -t fusiond/vm/faces) || fail "no faces message"
echo "$faces" | "$FUSIOND_PYTHON" -c 'import json,sys; f=json.load(sys.stdin)["faces"]; assert f == [], f; print("vm: faces reports 0 faces on the vivid test pattern")'

# --- the V4L2 output: missing at start (logged, the daemon runs on), back
# once v4l2loopback is loaded; a reader of the loopback gets the fused frames.
guest "journalctl -u fusiond --no-pager | grep -m1 'cannot open V4L2 output /dev/video10'" | sed 's/^.*fusiond\[[0-9]*\]: /vm: v4l2 out at start: /' \
    || fail "no report of the missing output device"
sub -C 1 -W 60 -t fusiond/vm/events -F '%p' > "$run/v4l2back.json" 2>/dev/null &
events=$!
sleep 1
# Two nodes: 10 for fusiond's output, 11 to feed the capture test below.
guest "modprobe v4l2loopback devices=2 video_nr=10,11 card_label=fusiond,feed exclusive_caps=1,1"
wait $events || true
grep -q '"event":"v4l2out_back"' "$run/v4l2back.json" || fail "no v4l2out_back event after loading v4l2loopback: $(cat "$run/v4l2back.json")"
echo "vm: v4l2loopback loaded -> $(cat "$run/v4l2back.json")"
guest "v4l2-ctl -d /dev/video10 --get-fmt-video | grep -E 'Width/Height|Pixel Format'" | sed 's/^ */vm: loopback format: /'
guest "v4l2-ctl -d /dev/video10 --stream-mmap --stream-count=5 --stream-to=/mnt/share/loop.yuyv"
sub -C 1 -W 120 -t fusiond/vm/frame > "$run/fused.jpg" || fail "no fused frame to compare with"
"$FUSIOND_PYTHON" - "$share/loop.yuyv" "$run/fused.jpg" <<'PY' || fail "the loopback frames do not match the fused stream"
import sys, cv2, numpy as np
raw = np.fromfile(sys.argv[1], dtype=np.uint8)
size = 640 * 480 * 2
assert raw.size == 5 * size, f"{raw.size} bytes read from the loopback, want 5 YUYV 640x480 frames"
loop = cv2.cvtColor(raw[-size:].reshape(480, 640, 2), cv2.COLOR_YUV2BGR_YUYV)
fused = cv2.imread(sys.argv[2])
diff = np.abs(loop.astype(int) - fused.astype(int)).mean()
# The same picture up to YUYV's shared chroma, JPEG and vivid's moving clock.
assert diff < 8, f"mean difference {diff:.1f} per channel"
print(f"vm: 5 YUYV 640x480 frames read from /dev/video10; mean difference to a fused frame {diff:.2f} levels")
PY

# --- camera loss through the driver: vivid's Disconnect control acts as an
# unplugged USB camera until the daemon closes it; no process restart.
sub -W 150 -t fusiond/vm/events -F '%p' > "$run/camera.json" 2>/dev/null &
events=$!
sleep 1
guest "v4l2-ctl -d /dev/video0 -c disconnect=1"
for _ in $(seq 140); do grep -q '"event":"camera_back"' "$run/camera.json" && break; sleep 1; done
kill $events 2>/dev/null || true
grep -q '"event":"camera_lost"' "$run/camera.json" || fail "no camera_lost after vivid's disconnect: $(cat "$run/camera.json")"
grep -q '"event":"camera_back"' "$run/camera.json" || fail "no camera_back after vivid's disconnect: $(cat "$run/camera.json")"
echo "vm: vivid disconnect -> $(grep -h -o '"event":"camera_[a-z]*"[^}]*' "$run/camera.json" | tr '\n' ' ')"

# --- real V4L2 buffers of a real photo, both ways: YUYV, NV12 and MJPEG
# fed in, YUYV and MJPG read out and checked to be the fused picture
# (tests/vm/drivers.sh).
. tests/vm/drivers.sh
drivers_check

show=$(guest "systemctl show fusiond -p Type -p ActiveState -p NRestarts")
echo "$show" | grep -qx "Type=notify" || fail "$show"
echo "$show" | grep -qx "ActiveState=active" || fail "$show"
echo "$show" | grep -qx "NRestarts=0" || fail "$show"
echo "vm: systemctl show fusiond: Type=notify, active, NRestarts=0"

# The staging unit mounted a tmpfs and staged the models before the daemon.
guest 'test "$(findmnt -n -o FSTYPE /run/fusiond/models)" = tmpfs && test -f /run/fusiond/models/.ready && ls /run/fusiond/models' \
    | sed 's/^/vm: staged: /'
guest 'a=$(systemctl show fusiond-stage -P ExecMainExitTimestampMonotonic); b=$(systemctl show fusiond -P ExecMainStartTimestampMonotonic); test "$a" -gt 0 && test "$a" -le "$b" && echo "stage exited at ${a}us, daemon started at ${b}us"' \
    | sed 's/^/vm: /'
guest 'while systemctl is-system-running | grep -q starting; do sleep 1; done; systemd-analyze time; echo "fusiond ready at $(systemctl show fusiond -P ActiveEnterTimestampMonotonic)us after boot"' \
    | sed 's/^/vm: boot: /'

guest "systemctl kill -s KILL fusiond"
wait_available offline
wait_available online
guest "systemctl show fusiond -p NRestarts" | grep -qx "NRestarts=1" || fail "no restart after SIGKILL"
echo "vm: SIGKILL -> restarted, online again (NRestarts=1)"

mosquitto_pub -h 127.0.0.1 -p "$port" -t fusiond/vm/stall/set -m now
wait_restarts 2 "the stall command (the watchdog)"
guest "journalctl -u fusiond --no-pager | grep -i 'watchdog timeout'" | tail -1 | sed 's/^/vm: /' \
    || fail "the journal has no watchdog timeout"
wait_available online
echo "vm: stalled pipeline -> watchdog restart (NRestarts=2), online again"
# A panic (the `panic` debug command) is recorded at error priority with
# the thread it happened on, and systemd restarts the daemon.
mosquitto_pub -h 127.0.0.1 -p "$port" -t fusiond/vm/panic/set -m now
wait_restarts 3 "the panic command"
wait_available online
panic=$(journal_record "thread .worker. panicked" "PRIORITY|MESSAGE")
echo "$panic" | grep -qx ' *PRIORITY=3' || fail "the panic is not recorded at PRIORITY=3: $panic"
echo "$panic" | grep -q "MESSAGE=thread 'worker' panicked at src/daemon/worker.rs:[0-9]*: panic command" \
    || fail "the panic record does not name the thread, the place and the message: $panic"
echo "vm: panic command -> restarted (NRestarts=3); journal:" $panic
# A known warning's journal record carries its priority and source file.
record=$(journal_record "cannot open V4L2 output" "PRIORITY|CODE_FILE|THREAD")
echo "$record" | grep -qx ' *PRIORITY=4' || fail "the missing-output warning is not PRIORITY=4: $record"
echo "$record" | grep -qx ' *CODE_FILE=src/vcam/mod.rs' || fail "the warning names no CODE_FILE: $record"
echo "vm: journald fields of the missing-output warning:" $record
# The package's upgrade and removal (tests/vm/package.sh).
package_lifecycle
echo "vm: ok"
