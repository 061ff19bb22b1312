# Sourced by tests/vm/run.sh once the guest is up: real V4L2 buffers of a
# real photo through v4l2loopback, both ways.
#
# - Capture: v4l2-ctl feeds /dev/video11 with the two-people frame as YUYV,
#   NV12 and MJPEG in turn; the daemon, pointed at it with that one format,
#   must find both faces each time.
# - Output: /dev/video10 is read back as YUYV and as MJPG (output.v4l2.formats)
#   and compared with the frame fed in: the swapped face must have changed
#   (the VM's tier swaps with latent_color_swapper, which paints a face with
#   a colour of the source) and the picture outside the faces must not, and the
#   loopback's picture must be MQTT's fused frame. An output that wrote the
#   camera's frames unfused fails.
#
# Uses run.sh's guest, sub, fail, wait_available, $share, $run and $shared.

# The feeds, made on the host: YUYV and NV12 raw frames (BT.601, limited
# range, as cameras send), and the JPEG.
make_feeds() {
    "$FUSIOND_PYTHON" - "$shared/camera/two_people_pan/frame_001.jpg" "$share" <<'PY'
import shutil, sys, cv2, numpy as np
src, share = sys.argv[1], sys.argv[2]
bgr = cv2.imread(src).astype(np.float32)
b, g, r = bgr[..., 0], bgr[..., 1], bgr[..., 2]
y = 16 + 0.257 * r + 0.504 * g + 0.098 * b
u = 128 - 0.148 * r - 0.291 * g + 0.439 * b
v = 128 + 0.439 * r - 0.368 * g - 0.071 * b
yuyv = np.empty((480, 640 * 2), np.float32)
yuyv[:, 0::2] = y
yuyv[:, 1::4] = (u[:, 0::2] + u[:, 1::2]) / 2
yuyv[:, 3::4] = (v[:, 0::2] + v[:, 1::2]) / 2
np.clip(yuyv.round(), 0, 255).astype(np.uint8).tofile(f"{share}/two.yuyv")
half = lambda c: (c[0::2, 0::2] + c[0::2, 1::2] + c[1::2, 0::2] + c[1::2, 1::2]) / 4
uv = np.stack([half(u), half(v)], axis=-1).reshape(240, 640)
nv12 = np.concatenate([y, uv])
np.clip(nv12.round(), 0, 255).astype(np.uint8).tofile(f"{share}/two.nv12")
shutil.copy(src, f"{share}/two.jpg")
PY
}

# Feeds /dev/video11 with $2 (a file in the share) as pixel format $1, in a
# loop, about 3 frames a second: under TCG a detection takes seconds, and a
# writer that never sleeps would starve it. The file is first padded to the
# loopback's buffer length, the format's image size rounded up to whole
# pages (v4l2-ctl fills whole buffers; a JPEG decoder stops at its end
# marker, and the daemon reads NV12 by its size, not the buffer's). The daemon is stopped first: a loopback node
# changes its format only while nobody reads it.
feed() {
    local format=$1 file=$2
    # The format is set by the streaming v4l2-ctl itself: the loopback
    # forgets one set by a writer that closed.
    local set="--set-fmt-video-out=width=640,height=480,pixelformat=$format"
    guest "systemctl stop fusiond; pkill -f 'v4l2-ctl -d /dev/video11' || true; sleep 1
        cp /mnt/share/$file /tmp/feed
        size=\$(v4l2-ctl -d /dev/video11 $set --get-fmt-video-out | sed -n 's/.*Size Image *: *//p')
        size=\$(( (size + 4095) / 4096 * 4096 ))
        truncate -s \"\$size\" /tmp/feed
        echo \"buffer size \$size bytes\"
        setsid v4l2-ctl -d /dev/video11 $set --stream-out-mmap --stream-from=/tmp/feed --stream-loop --stream-sleep=3 \
            >/tmp/feed.log 2>&1 < /dev/null & sleep 3
        v4l2-ctl -d /dev/video11 --get-fmt-video | grep -E 'Pixel Format' || { cat /tmp/feed.log; exit 1; }" |
        sed "s/^ */vm: feed $format: /"
}

# Waits, over up to $1 faces messages, for one whose faces `f` make the
# Python expression $2 true; keeps it in $3, or fails with $4.
faces_until() {
    local faces
    for _ in $(seq "$1"); do
        faces=$(sub -C 1 -W 60 -t fusiond/vm/faces) || fail "no faces message: $4"
        if echo "$faces" | "$FUSIOND_PYTHON" -c "import json,sys; f=json.load(sys.stdin)['faces']; sys.exit(0 if $2 else 1)"; then
            echo "$faces" > "$3"
            return
        fi
    done
    fail "$4"
}

# Restarts the daemon on the fed node with capture format $1 and output
# format $2, and waits for a faces message with both faces.
capture() {
    guest "printf '[camera]\\ndevice = \"/dev/video11\"\\nformats = [\"$1\"]\\n[output.v4l2]\\nformats = [\"$2\"]\\n' \
        > /etc/fusiond/conf.d/60-feed.toml && systemctl restart fusiond"
    wait_available online
    faces_until 30 'len(f) == 2' "$run/faces-$1.json" \
        "the daemon never found the two faces in the $1 frames fed through /dev/video11"
    echo "vm: two-people frame fed as $1 through v4l2loopback: faces reports 2 faces"
}

# Reads 8 frames of /dev/video10 as $1 and checks them against the fed
# photo and an MQTT frame taken at the same time.
output() {
    local format=$1
    # A source to swap in (a restart keeps none), then a frame with a face
    # swapped (the selector is `one`: the other face stays as it was).
    mosquitto_pub -h 127.0.0.1 -p "$port" -t fusiond/vm/source/set -f "$shared/images/fr_obama2.jpg"
    faces_until 40 'len(f) == 2 and any(x["swapped"] for x in f)' "$run/faces-$capture_format.json" \
        "no face was swapped after the source was set"
    # The daemon opens its output when the first fused frame is ready.
    guest "for i in \$(seq 120); do v4l2-ctl -d /dev/video10 --get-fmt-video | grep 'Pixel Format' && exit 0; sleep 1; done
        exit 1" | sed 's/^ */vm: loopback output: /'
    # To the guest's tmpfs first: v4l2loopback's reader and writer share
    # its buffers, and a slow copy onto the 9p share can be overtaken by the
    # writer's next frame (a torn JPEG, seen once in CI).
    guest "v4l2-ctl -d /dev/video10 --stream-mmap --stream-count=8 --stream-to=/tmp/out.$format &&
        cp /tmp/out.$format /mnt/share/out.$format"
    sub -C 1 -W 120 -t fusiond/vm/frame > "$run/fused-$format.jpg" || fail "no fused frame to compare with"
    "$FUSIOND_PYTHON" - "$format" "$share/out.$format" "$run/fused-$format.jpg" "$share/two.jpg" "$run/faces-$capture_format.json" <<'PY' \
        || fail "the $format output is not the fused picture"
import json, sys, cv2, numpy as np
fmt, out, fused, fed, faces = sys.argv[1:6]
data = np.fromfile(out, dtype=np.uint8)
if fmt == "YUYV":
    size = 640 * 480 * 2
    assert data.size == 8 * size, f"{data.size} bytes read, want 8 YUYV 640x480 frames"
    loop = cv2.cvtColor(data[-size:].reshape(480, 640, 2), cv2.COLOR_YUV2BGR_YUYV)
else:
    # Each buffer holds one JPEG (bytesused bytes); the newest one that is
    # whole (ends with its EOI marker and decodes at 640x480) is compared.
    raw = data.tobytes()
    starts = [i for i in range(len(raw) - 2) if raw[i:i + 3] == b"\xff\xd8\xff"]
    assert len(starts) >= 8, f"{len(starts)} JPEGs in {len(raw)} bytes read, want 8"
    whole, broken, padded = [], [], 0
    for i, (a, b) in enumerate(zip(starts, starts[1:] + [len(raw)])):
        # v4l2loopback (0.12) resets every buffer's bytesused to the image
        # size when a reader asks for buffers, so a reader's first buffer
        # can be the last JPEG written followed by zero padding.
        jpeg = raw[a:b].rstrip(b"\0")
        img = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR) if jpeg.endswith(b"\xff\xd9") else None
        if img is not None and img.shape[:2] == (480, 640):
            whole.append(img)
            padded += len(jpeg) < b - a
        else:
            broken.append(f"#{i + 1}: {len(jpeg)} bytes, ends {jpeg[-2:].hex()}")
    print(f"vm: MJPG output: {len(whole)} of {len(starts)} buffers are whole 640x480 JPEGs ({padded} zero-padded); not whole: {broken}")
    # fusiond fills the loopback's buffers in turn (src/vcam/ring.rs), the
    # first frame all of them: a reader gets no buffer left unfilled and
    # has a whole frame's time to copy one before it is written again.
    assert len(whole) == len(starts), "an MJPG buffer read is not a whole 640x480 JPEG"
    loop = whole[-1]
fused = cv2.imread(fused).astype(int)
fed = cv2.imread(fed).astype(int)
loop = loop.astype(int)
inside = np.zeros((480, 640), bool)
swapped = np.zeros((480, 640), bool)
for f in json.load(open(faces))["faces"]:
    x1, y1, x2, y2 = (int(round(v)) for v in f["box"])
    inside[max(y1, 0):y2, max(x1, 0):x2] = True
    swapped[max(y1, 0):y2, max(x1, 0):x2] |= f["swapped"]
to_fused = np.abs(loop - fused).mean()
face_change = np.abs(loop - fed)[swapped].mean()
rest_change = np.abs(loop - fed)[~inside].mean()
print(f"vm: {fmt} output: mean difference to MQTT's fused frame {to_fused:.2f}; to the fed photo "
      f"{face_change:.1f} inside the swapped face, {rest_change:.2f} outside the faces")
assert to_fused < 8, "the loopback's picture is not the fused frame"
assert face_change > 3 * rest_change and face_change > 10, "the swapped face is not swapped in the output"
assert rest_change < 8, "the picture outside the faces changed"
PY
}

drivers_check() {
    make_feeds
    feed YUYV two.yuyv
    capture_format=YUYV
    capture YUYV YUYV
    output YUYV
    feed NV12 two.nv12
    capture_format=NV12
    capture NV12 MJPG
    output MJPG
    feed MJPG two.jpg
    capture_format=MJPG
    capture MJPG YUYV
}
