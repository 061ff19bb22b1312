#!/usr/bin/env python3
"""The soak under faults (tests/soak.sh runs it): the daemon on the sample
feed with a real mosquitto, for DURATION, while a scheduler
  - restarts the broker (every DURATION/20, at least 30 s),
  - unplugs the camera with the `unplug` debug command (every DURATION/6),
  - sends SIGHUP and then a flood of valid and hostile commands (every
    DURATION/12), waits for every answer, and sets the settings the flood
    changed back before the quiet point,
  - fills the model tmpfs once (at half time), SIGHUPs, empties it, SIGHUPs,
and a watcher reads every message on <base>/#. It prints RSS over time and
its slope, processed fps, frames dropped, commands sent against answered,
and reconnect times, then checks the goals: RSS at every quiet point (the
median of 25 readings in the 5 s up to 10 s after each flood, the
warm-up's included) within 5 % of the settled value (their median; 10 % in
runs under ten minutes, see rss_bound), no command lost, every reconnect
within the backoff bound, one process throughout. Exit 1 names each goal missed.
"""
import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt

BASE = "fusiond/soak"
CHEAP_VALID = [("blend", lambda r: str(r.randint(0, 100))), ("enabled", lambda r: "ON"),
               ("mask_blur", lambda r: f"0.{r.randint(0, 9)}"), ("selector", lambda r: r.choice(["one", "many"])),
               ("face_order", lambda r: "large-small")]
HOSTILE = [("blend", "500"), ("blend", "abc"), ("launch", "1"), ("selector", "everyone"),
           ("mask_padding", "1,2,x,4"), ("enabled", "\xff\xfe"), ("map", "a=b=c")]


class Watch:
    """Every message under BASE, in order (frames by size only)."""

    def __init__(self, port):
        self.lock = threading.Lock()
        self.msgs = []
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="soak-watch")
        self.client.reconnect_delay_set(0.1, 0.5)
        self.client.on_connect = lambda c, *_: c.subscribe(f"{BASE}/#", qos=1)
        self.client.on_message = self.on_message
        self.client.connect_async("127.0.0.1", port)
        self.client.loop_start()

    def on_message(self, _c, _u, m):
        payload = b"" if m.topic.endswith(("/frame", "/snapshot")) else m.payload
        with self.lock:
            self.msgs.append((time.monotonic(), m.topic[len(BASE) + 1:], payload))

    def since(self, at):
        with self.lock:
            return self.msgs[at:]

    def count(self):
        with self.lock:
            return len(self.msgs)

    def send(self, feature, payload):
        self.client.publish(f"{BASE}/{feature}/set", payload, qos=1)

    def wait_for(self, at, pred, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for t, topic, payload in self.since(at):
                if pred(topic, payload):
                    return t
            time.sleep(0.05)
        return None


def event_is(name):
    return lambda topic, p: topic == "events" and json.loads(p).get("event") == name


class Broker:
    """mosquitto on 127.0.0.1:port, restartable."""

    def __init__(self, conf, port, log):
        self.conf, self.port, self.log = conf, port, log
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(["mosquitto", "-c", self.conf], stderr=open(self.log, "ab"))
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        sys.exit(f"soak: mosquitto did not listen on {self.port}; see {self.log}")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()

    def restart(self):
        self.stop()
        self.start()


class Soak:
    def __init__(self, args):
        self.args, self.rand = args, random.Random(7)
        self.broker = Broker(args.mosquitto_conf, args.port, args.mosquitto_log)
        self.watch = Watch(args.port)
        self.daemon = subprocess.Popen([args.daemon, "run", "--config", args.config], stderr=open(args.log, "wb"))
        self.pid = self.daemon.pid
        self.rss = []  # (seconds since start, bytes)
        self.settled = []  # (label, seconds, bytes): RSS once a fault has passed
        self.parts = []  # each settled reading's parts (rss_parts)
        self.sent, self.answered = {}, {}
        self.pipeline = []  # (label, frames_processed, processed_fps) at each quiet point
        self.applied_hostile = []  # hostile commands whose value reached a state
        self.reconnects, self.notes, self.start = [], [], time.monotonic()
        self.photos = [Path(args.shared, "images", n).read_bytes() for n in ("fr_obama2.jpg", "fr_biden.jpg")]

    def now(self):
        return time.monotonic() - self.start

    def rss_parts(self):
        """VmRSS and its parts (anonymous, file-backed, shared memory), bytes."""
        keys = {"VmRSS:": "rss", "RssAnon:": "anon", "RssFile:": "file", "RssShmem:": "shmem"}
        parts = dict.fromkeys(keys.values(), 0)
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key = line.split(maxsplit=1)[0] if line else ""
            if key in keys:
                parts[keys[key]] = int(line.split()[1]) * 1024
        return parts

    def rss_now(self):
        return self.rss_parts()["rss"]

    def sample(self):
        while True:
            try:
                self.rss.append((self.now(), self.rss_now()))
            except OSError:
                return
            time.sleep(2)

    def settle(self, label):
        """RSS once a fault has passed: the median of 25 readings over 5 s.
        The worker is never idle on this feed (it drops frames, newest wins),
        and a frame's buffers are 30-45 MB of a 100 MB process (RSS falls to
        70 MB while the camera is unplugged), so a reading depends on the
        stage of the frame it catches. The median of five readings a second
        apart still moved by 13 MB of anonymous memory between quiet points
        of one run; over 25 readings the stages average out."""
        time.sleep(max(0.0, self.args.settle - 5))
        readings = []
        for _ in range(25):
            readings.append(self.rss_parts())
            time.sleep(0.2)
        median = sorted(readings, key=lambda p: p["rss"])[len(readings) // 2]
        self.settled.append((label, self.now(), median["rss"]))
        self.parts.append(median)
        stats = [json.loads(p) for _, t, p in self.watch.since(0) if t == "stats"]
        last = stats[-1] if stats else {}
        self.pipeline.append((label, last.get("frames_processed", 0), last.get("processed_fps") or 0.0))

    def restart_broker(self):
        at = self.watch.count()
        self.broker.restart()
        up = time.monotonic()
        seen = self.watch.wait_for(at, lambda t, p: t == "available" and p == b"online", 60)
        self.reconnects.append(None if seen is None else seen - up)

    def unplug(self):
        at = self.watch.count()
        self.watch.send("unplug", "3")
        lost = self.watch.wait_for(at, event_is("camera_lost"), 30)
        back = self.watch.wait_for(at, event_is("camera_back"), 60)
        self.notes.append(f"unplug at {self.now():.0f}s: camera_lost {'yes' if lost else 'NO'}, "
                          f"camera_back {'yes' if back else 'NO'}")
        self.count("unplug", 1, 1 if lost and back else 0)

    def stall(self):
        """The fault the pipeline goals exist for: the worker hangs while the
        control loop goes on answering (debug.stall_command)."""
        self.watch.send("stall", "PRESS")
        self.notes.append(f"worker stalled on purpose at {self.now():.0f}s")

    def sighup(self, label, expect="reloaded"):
        at = self.watch.count()
        os.kill(self.pid, signal.SIGHUP)
        refusal = lambda t, p: t == "error" and json.loads(p).get("command") == "reload"  # noqa: E731
        done = self.watch.wait_for(at, lambda t, p: event_is("reloaded")(t, p) or refusal(t, p), 120)
        ok = done and self.watch.wait_for(at, event_is("reloaded"), 0.1)
        outcome = "reloaded" if ok else ("refused" if done else "NO ANSWER")
        self.notes.append(f"SIGHUP ({label}) at {self.now():.0f}s: {outcome}")
        self.count("SIGHUP", 1, 0 if outcome == "NO ANSWER" else 1)
        return outcome

    def count(self, feature, sent, answered):
        self.sent[feature] = self.sent.get(feature, 0) + sent
        self.answered[feature] = self.answered.get(feature, 0) + answered

    def flood_commands(self):
        out = []
        for _ in range(self.args.flood):
            roll = self.rand.random()
            if roll < 0.5:
                feature, make = self.rand.choice(CHEAP_VALID)
                out.append((feature, make(self.rand)))
            elif roll < 0.7:
                out.append(("hostile",) + self.rand.choice(HOSTILE))
            elif roll < 0.8:
                out.append(("source", self.rand.randbytes(300_000)))
            elif roll < 0.9:
                out.append(("source", self.rand.choice(self.photos)))
            else:
                out.append(("reload", "PRESS"))
        return out

    @staticmethod
    def answers(msgs, feature):
        n = 0
        if feature.startswith("hostile "):
            feature = feature.split(" ", 1)[1]
            return sum(1 for _, t, p in msgs if t == "error" and json.loads(p).get("command") == feature)
        for _, topic, payload in msgs:
            if topic == "error":
                n += json.loads(payload).get("command") == feature
            elif feature == "source":
                n += topic == "events" and json.loads(payload).get("event") == "source_set"
            elif feature == "reload":
                n += topic == "events" and json.loads(payload).get("event") == "reloaded"
            else:
                n += topic == f"{feature}/state"
        return n

    def flood(self):
        self.sighup("before the flood")
        self.command_round(self.flood_commands())
        # A flood leaves the settings where its last commands put them, and
        # the pipeline's memory follows them (with `selector many` every
        # frame swaps both faces, with `one` only one): they are set back to
        # the packaged config's before each quiet point, so that every quiet
        # point measures the same pipeline.
        self.command_round([("enabled", "ON"), ("blend", "100"), ("mask_blur", "0.3"), ("selector", "one"),
                            ("face_order", "large-small"), ("source", self.photos[1])])
        self.settle("flood")

    def command_round(self, commands):
        """Sends `commands` at once and waits up to 120 s for every answer.
        A hostile command ("hostile", feature, payload) is answered only by
        an error, and its value reaching the feature's state is a failure."""
        at = self.watch.count()
        hostile = [(f, p) for c in commands if c[0] == "hostile" for f, p in [c[1:]]]
        for c in commands:
            self.watch.send(*c[-2:])
        want = {}
        for c in commands:
            key = f"hostile {c[1]}" if c[0] == "hostile" else c[0]
            want[key] = want.get(key, 0) + 1
        end = time.monotonic() + 120
        while time.monotonic() < end:
            msgs = self.watch.since(at)
            got = {f: self.answers(msgs, f) for f in want}
            if all(got[f] >= n for f, n in want.items()):
                break
            time.sleep(0.2)
        for f, n in want.items():
            self.count(f, n, min(got[f], n))
        states = {(t[: -len("/state")], p) for _, t, p in self.watch.since(at) if t.endswith("/state")}
        self.applied_hostile += [(f, p) for f, p in hostile if (f, p.encode() if isinstance(p, str) else p) in states]

    def stage(self):
        done = subprocess.run([self.args.daemon, "stage", "--verify", "--config", self.args.config],
                              capture_output=True, text=True)
        lines = (done.stdout + done.stderr).strip().splitlines() or ["(nothing)"]
        why = ([line for line in lines if "unusable" in line.lower()]
               or [line for line in lines if line.startswith(("error", "warn"))])
        return done.returncode, (why or lines)[-1].strip()[:200]

    def fill_tmpfs(self):
        """A staged model tampered with, then a ramdisk too full for a new
        tier: re-staging repairs the one, refuses the other clearly, and the
        daemon runs on; once emptied, staging and a reload both succeed."""
        ramdisk = Path(self.args.ramdisk)
        victim = max(ramdisk.glob("*.onnx"), key=lambda p: p.stat().st_size)
        with open(victim, "r+b") as f:
            f.seek(64)
            f.write(b"\xff" * 16)
        repaired = self.stage()
        fragment = Path(self.args.config).parent / "conf.d/60-soak-quality.toml"
        # conf.d replaces the [[tier]] list whole, so it names both tiers.
        fragment.write_text('[[tier]]\nname = "fast"\nmodels = ["yunet_2023mar", "arcface_fr", "latent_color_swapper"]\n\n'
                            '[[tier]]\nname = "quality"\nmodels = ["scrfd_500m", "arcface_fr", "latent_color_swapper"]\n')
        filler = ramdisk / "filler"
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 16))
                    f.flush()
            except OSError:
                pass
        full = self.stage()
        during = self.sighup("tmpfs full")
        filler.unlink()
        emptied = self.stage()
        after = self.sighup("tmpfs emptied and restaged")
        fragment.unlink()
        self.notes.append(f"tampered {victim.name}: stage --verify exit {repaired[0]} ({repaired[1]})")
        self.notes.append(f"full tmpfs: stage exit {full[0]} ({full[1]}); reload {during}; "
                          f"emptied: stage exit {emptied[0]}, reload {after}")
        ok = repaired[0] == 0 and full[0] != 0 and "unusable" in full[1].lower() and emptied[0] == 0 and after == "reloaded"
        self.count("tampered model, then full tmpfs", 1, int(ok))

    def run(self):
        d = self.args.seconds
        if self.watch.wait_for(0, lambda t, p: t == "available" and p == b"online", 120) is None:
            print(f"soak: FAILED: the daemon never came online; see {self.args.log}")
            return 1
        self.start = time.monotonic()
        threading.Thread(target=self.sample, daemon=True).start()
        # Warm-up: one flood first, so that the buffers sized to the largest
        # photo and payload are part of the settled value the goal is about.
        time.sleep(self.args.warmup / 2)
        self.flood()
        self.settled[-1] = ("warm-up", *self.settled[-1][1:])
        self.pipeline[-1] = ("warm-up", *self.pipeline[-1][1:])
        every = {"broker": max(30, d / 20), "unplug": max(40, d / 6), "flood": max(25, d / 12)}
        due = {k: self.now() + v / 2 for k, v in every.items()}
        due["tmpfs"] = d / 2
        act = {"broker": self.restart_broker, "unplug": self.unplug, "flood": self.flood, "tmpfs": self.fill_tmpfs,
               "stall": self.stall}
        if self.args.stall_at:
            due["stall"] = self.args.stall_at
        while True:
            kind = min(due, key=due.get)
            if due[kind] >= d:
                break
            time.sleep(max(0.0, due[kind] - self.now()))
            act[kind]()
            due[kind] = float("inf") if kind in ("tmpfs", "stall") else due[kind] + every[kind]
        time.sleep(max(0.0, d - self.now()))
        return self.report()

    def report(self):
        msgs = self.watch.since(0)
        stats = [json.loads(p) for _, t, p in msgs if t == "stats"]
        faces = sum(1 for _, t, _ in msgs if t == "faces")
        print(f"soak: {self.now():.0f} s, {len(msgs)} messages read ({faces} faces, {len(stats)} stats)")
        step = max(1, len(self.rss) // 12)
        print("soak: RSS over time: " + ", ".join(f"{t:.0f}s {b / 2**20:.0f}MB" for t, b in self.rss[::step]))
        quiet = [(t, b) for _, t, b in self.settled]
        slope = linear_slope(quiet) * 3600 / 2**20 if len(quiet) > 2 else 0.0
        print(f"soak: settled RSS slope {slope:+.1f} MB/hour over {len(quiet)} quiet points "
              f"(all samples: min {min(b for _, b in self.rss) / 2**20:.0f} MB, "
              f"max {max(b for _, b in self.rss) / 2**20:.0f} MB)")
        base = sorted(b for _, _, b in self.settled)[len(self.settled) // 2]
        print(f"soak: settled RSS (the median of the quiet points) {base / 2**20:.1f} MB")
        for (label, t, b), p in zip(self.settled, self.parts):
            mb = {k: v / 2**20 for k, v in p.items()}
            print(f"soak: settled RSS {label} at {t:.0f}s: {b / 2**20:.1f} MB ({(b / base - 1) * 100:+.1f} %; "
                  f"anon {mb['anon']:.1f}, file {mb['file']:.1f}, shmem {mb['shmem']:.1f} MB)")
        if stats:
            last = stats[-1]
            fps = [s["processed_fps"] for s in stats if s.get("processed_fps")]
            print(f"soak: processed fps mean {sum(fps) / max(1, len(fps)):.1f}, frames processed "
                  f"{last['frames_processed']}, dropped {last['dropped_frames']} (newest wins), dropped "
                  f"messages {last['dropped_messages']}, busy commands {last['dropped_commands']}, coalesced "
                  f"{last['coalesced_commands']}, MQTT connects {last['mqtt_connects']}")
        for f in sorted(self.sent):
            print(f"soak: commands {f}: sent {self.sent[f]}, answered {self.answered[f]}")
        shown = ", ".join("none" if r is None else f"{r:.2f}s" for r in self.reconnects)
        print(f"soak: reconnects after broker restarts: {shown or 'no restart'}")
        for n in self.notes:
            print(f"soak: {n}")
        return self.goals(base)

    def pipeline_goals(self):
        for label, frames, fps in self.pipeline:
            print(f"soak: pipeline at {label}: {frames} frames processed, {fps:.1f} fps")
        return pipeline_goals_of(self.pipeline, self.applied_hostile)

    def rss_bound(self):
        """How far a quiet point may be from the settled value: 5 % from ten
        minutes on; 10 % in shorter runs, whose five quiet points come
        between faults seconds apart. 2-minute runs of this daemon here, no
        leak: worst points 5.0, 5.7 and 5.6 % with the settings set back before
        each quiet point (3.7 to 10.8 % in five runs, and CI's 7.9 %, with
        them as the flood left them). A leak like the one the trim fixed
        (+23 % after four floods) fails either bound."""
        return 0.05 if self.args.seconds >= 600 else 0.10

    def goals(self, base):
        missed = []
        bound = self.rss_bound()
        worst = max((abs(b / base - 1) for _, _, b in self.settled), default=0)
        if worst > bound:
            missed.append(f"a quiet point's RSS is {worst * 100:.1f} % off the settled value "
                          f"(goal: within {bound * 100:.0f} %)")
        lost = {f: self.sent[f] - self.answered[f] for f in self.sent if self.sent[f] != self.answered[f]}
        if lost:
            missed.append(f"commands without an answer: {lost}")
        missed += self.pipeline_goals()
        slow = [r for r in self.reconnects if r is None or r > self.args.reconnect_bound]
        if slow:
            missed.append(f"reconnects over {self.args.reconnect_bound} s: {slow}")
        if self.daemon.poll() is not None:
            missed.append(f"the daemon exited ({self.daemon.returncode}); see {self.args.log}")
        for m in missed:
            print(f"soak: FAILED: {m}")
        if not missed:
            print(f"soak: ok (RSS settled within {bound * 100:.0f} %, no command lost, reconnects within the bound, "
                  "one process)")
        return 1 if missed else 0


FPS_FLOOR = 0.6


def pipeline_goals_of(pipeline, applied_hostile):
    """The goals that see the worker itself (the control loop answers
    commands even with a dead worker): frames_processed rises between every
    two quiet points, the processed rate at each quiet point is at least
    FPS_FLOOR of the warm-up's (the rate this machine reaches on the 15 fps
    feed: 12.5-15.2 fps for the dev build on two cores here, the warm-up
    itself at the low end, so 0.6 and not 0.8 keeps a slow warm-up from
    failing a healthy run; a slower box is judged by its own), and no
    hostile command's value reached a state."""
    missed = []
    for (a, fa, _), (b, fb, _) in zip(pipeline, pipeline[1:]):
        if fb <= fa:
            missed.append(f"frames_processed did not rise from {a} to {b} ({fa} then {fb}): the worker is stalled")
    if pipeline:
        floor = FPS_FLOOR * pipeline[0][2]
        low = [(label, fps) for label, _, fps in pipeline[1:] if fps < floor]
        if pipeline[0][2] <= 0 or low:
            missed.append(f"processed fps under {floor:.1f} ({FPS_FLOOR} of the warm-up's {pipeline[0][2]:.1f}): {low}")
    if applied_hostile:
        missed.append(f"hostile commands applied: {applied_hostile}")
    return missed


def linear_slope(points):
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(b for _, b in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    return sum((t - mx) * (b - my) for t, b in points) / var if var else 0.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--daemon", required=True, help="the fusiond binary")
    p.add_argument("--config", required=True)
    p.add_argument("--log", required=True, help="where the daemon's log goes")
    p.add_argument("--mosquitto-conf", required=True)
    p.add_argument("--mosquitto-log", required=True)
    p.add_argument("--shared", required=True)
    p.add_argument("--ramdisk", required=True)
    p.add_argument("--warmup", type=float, default=30)
    p.add_argument("--settle", type=float, default=10)
    p.add_argument("--flood", type=int, default=200)
    p.add_argument("--reconnect-bound", type=float, default=7, help="mqtt.reconnect_max_s plus 2 s")
    p.add_argument("--stall-at", type=float, default=0, help="stall the worker at this second (the goals must fail)")
    soak = Soak(p.parse_args())
    code = 1
    try:
        code = soak.run()
    finally:
        soak.daemon.terminate()
        try:
            soak.daemon.wait(30)
        except subprocess.TimeoutExpired:
            # A stalled worker never drains (SOAK_STALL): systemd would kill
            # it after TimeoutStopSec, and so does the soak.
            print("soak: the daemon did not stop within 30 s of SIGTERM; killed")
            soak.daemon.kill()
            soak.daemon.wait(30)
            code = code or 1
        soak.broker.stop()
    sys.exit(code)


if __name__ == "__main__":
    main()
