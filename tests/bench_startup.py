#!/usr/bin/env python3
"""Cold start and memory of the model store, FP32 against INT8 and tmpfs
against disk, side by side in one run. Prints figures; asserts nothing.

  tests/bench_startup.py [--runs N] [--swapper-dir DIR --swapper NAME]

Needs root (it mounts tmpfs ramdisks) and FUSIOND_BIN, FUSIOND_SHARED, and
FUSIOND_INT8_MODELS / FUSIOND_CONTRACT_MODELS (made by models/quantize and
models/make_contract_models.py; README shows the commands). Each `fusiond load` is a fresh process: ready_s is
process start -> tier loaded and warmed, from /proc.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

BIN = os.environ["FUSIOND_BIN"]
SHARED = Path(os.environ["FUSIOND_SHARED"])
INT8 = Path(os.environ["FUSIOND_INT8_MODELS"])
CONTRACT = Path(os.environ["FUSIOND_CONTRACT_MODELS"])


def config(path, ramdisk, dirs, models):
    path.write_text(
        f"[models]\ndirs = {json.dumps([str(d) for d in dirs])}\nramdisk = \"{ramdisk}\"\n"
        f"ramdisk_size_mib = 2048\n[[tier]]\nname = \"fast\"\nmodels = {json.dumps(models)}\n")
    return path


def drop_caches():
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def load(cfg, runs, cold):
    out = []
    for _ in range(runs):
        dropped = drop_caches() if cold else False
        r = subprocess.run([BIN, "load", "--config", str(cfg), "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"fusiond load failed: {r.stderr}")
        rep = json.loads(r.stdout)
        rep["dropped"] = dropped
        out.append(rep)
    return out


def tmpfs_bytes(ramdisk):
    return sum(p.stat().st_size for p in Path(ramdisk).iterdir() if p.is_file())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--swapper-dir", type=Path, default=CONTRACT)
    ap.add_argument("--swapper", default="identity_swapper")
    ap.add_argument("--swapper-int8", default=None, help="INT8 swapper name (default: the FP32 one)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fusiond-bench-"))
    sets = {
        "fp32": ["scrfd_500m", "arcface_fr", args.swapper],
        "int8": ["scrfd_500m_int8", "arcface_fr_int8", args.swapper_int8 or args.swapper],
    }
    dirs = [SHARED / "models", INT8, args.swapper_dir]
    rows = {}
    for variant, models in sets.items():
        rd = work / f"rd-{variant}"
        cfg = config(work / f"{variant}.toml", rd, dirs, models)
        stage = subprocess.run([BIN, "stage", "--config", str(cfg)], capture_output=True, text=True)
        print(f"== stage {variant}\n{stage.stdout.rstrip()}")
        rows[f"{variant} tmpfs"] = (load(cfg, args.runs, cold=False), tmpfs_bytes(rd))
        disk_cfg = config(work / f"{variant}-disk.toml", work / "not-staged", dirs, models)
        rows[f"{variant} disk (page cache dropped)"] = (load(disk_cfg, args.runs, cold=True), 0)
        subprocess.run(["umount", str(rd)], check=False)

    print(f"\n== cold start and memory, median of {args.runs} fresh processes (tract, 1 thread)")
    print(f"{'variant':<34}{'ready ms':>9}{'rss MB':>8}{'peak MB':>8}{'tmpfs MB':>9}   per model: map/parse/optimise/plan/warm-up ms")
    summary = {}
    for label, (reps, tmpfs) in rows.items():
        ready = statistics.median(r["ready_s"] * 1e3 for r in reps)
        rss = statistics.median(r["rss_bytes"] for r in reps) / 1e6
        peak = statistics.median(r["peak_rss_bytes"] for r in reps) / 1e6
        summary[label] = (ready, peak)
        last = reps[len(reps) // 2]["models"]
        phases = "  ".join(
            f"{m['name']}: " + "/".join(f"{m['timings'][k]['secs'] * 1e3 + m['timings'][k]['nanos'] / 1e6:.0f}"
                                      for k in ("map", "parse", "optimize", "plan", "warmup"))
            for m in last)
        note = "" if reps[0]["dropped"] or "disk" not in label else " (cache NOT dropped)"
        print(f"{label + note:<34}{ready:>9.0f}{rss:>8.1f}{peak:>8.1f}{tmpfs / 1e6:>9.1f}   {phases}")
    f, i = summary["fp32 tmpfs"], summary["int8 tmpfs"]
    fd, idk = summary["fp32 disk (page cache dropped)"], summary["int8 disk (page cache dropped)"]
    print(f"\nratios: INT8/FP32 ready {i[0] / f[0]:.2f}x, peak RSS {i[1] / f[1]:.2f}x; "
          f"disk/tmpfs ready FP32 {fd[0] / f[0]:.2f}x, INT8 {idk[0] / i[0]:.2f}x")


if __name__ == "__main__":
    main()
