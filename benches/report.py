#!/usr/bin/env python3
"""Side-by-side summaries for benches/run.sh, from the JSON the runs wrote.

  report.py pipeline TRACT.json ORT.json REFERENCE.json
      fusiond (tract, ONNX Runtime) against the NumPy/OpenCV reference per
      640x480 frame with 1 and 2 faces, with the ratios.
  report.py roofline MODELS.json GFLOP MODEL
      GFLOP/s that MODEL's rows of `fusiond-bench models` achieve, against
      this machine's peak (derived below from /proc/cpuinfo and printed).
"""
import json
import sys


def pipeline(tract_path, ort_path, ref_path, letterbox_path=None):
    """fusiond on each engine against the reference; with `letterbox_path`, a
    third fusiond run on ONNX Runtime with the detector at the reference's
    square letterbox (--size), beside the fitted one."""
    runs = {"tract": json.load(open(tract_path)), "ort": json.load(open(ort_path))}
    if letterbox_path:
        runs["ort-box"] = json.load(open(letterbox_path))
    ref = json.load(open(ref_path))
    for engine, doc in runs.items():
        if "detector_size" in doc:
            w, h = doc["detector_size"]
            print(f"  fusiond/{engine}: {doc['detector']} at {w}x{h}")
    print("  reference: the detector at its declared input size, the frame letterboxed into it as FaceFusion does")
    cols = list(runs)
    head = "".join(f"{'fusiond/' + e:>15}" for e in cols) + "  reference" + "".join(f"{'ref/' + e:>12}" for e in cols)
    print(f"  scenario   stage       {head}")
    for label, key in (("1 face", "1 face"), ("2 faces", "2 faces")):
        rows = {}
        for engine, doc in runs.items():
            # fusiond-bench live's scenarios: "1 face"/"2 faces", swap mode; e2e there includes YUYV and publishing.
            rows[engine] = next(r for r in doc["rows"] if r["scenario"] == label and r["mode"] == "swap")["ms"]
        r = ref[key]
        for name, ours, theirs in (("inference", "inference", "inference"), ("pixelwork", "pixelwork", "pixel"),
                                   ("jpeg", "jpeg", "jpeg"), ("frame*", "frame", "total")):
            x = r[theirs]
            ms = "".join(f"{rows[e][ours]:>15.2f}" for e in cols)
            ratios = "".join(f"{x / rows[e][ours]:>11.2f}x" for e in cols)
            print(f"  {label:<10} {name:<11} {ms} {x:>10.2f}{ratios}")
    print("  frame* = inference + pixelwork + jpeg, the work both sides do, summed per frame and then the median")
    print("  on both sides (fusiond's YUYV conversion and MQTT publishing are left out; fusiond-bench live prints")
    print("  them); the stage rows are medians of their own. ref/x > 1: fusiond is that many times faster.")


def cpu():
    info = open("/proc/cpuinfo").read()
    first = info.split("\n\n")[0]
    field = lambda k: next((l.split(":", 1)[1].strip() for l in first.splitlines() if l.startswith(k)), "")
    flags = set(field("flags").split())
    vendor, family, model = field("vendor_id"), int(field("cpu family") or 0), int(field("model") or 0)
    # The clock: BENCH_CLOCK_MHZ (measured by `fusiond-bench clock`, which
    # benches/run.sh runs), else BENCH_PEAK_MHZ (given), else cpufreq's
    # maximum or the (often nominal) clock /proc/cpuinfo reports, both
    # assumptions.
    import os
    mhz, source = float(field("cpu MHz") or 0), "assumed: /proc/cpuinfo's cpu MHz"
    try:
        mhz = int(open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read()) / 1e3
        source = "assumed: cpufreq's cpuinfo_max_freq"
    except OSError:
        pass
    for var, what in (("BENCH_PEAK_MHZ", "given: BENCH_PEAK_MHZ"), ("BENCH_CLOCK_MHZ", "measured: fusiond-bench clock")):
        if os.environ.get(var):
            mhz, source = float(os.environ[var]), what
    # FP32 FLOP per cycle per core = FMA pipes x lanes x 2.
    if vendor == "AuthenticAMD" and family == 23 and model < 0x30:
        fp32, why = 16, "Zen/Zen+: two 128-bit FMA pipes (AVX2 runs as 2x128) = 2 x 4 lanes x 2"
    elif vendor == "AuthenticAMD":
        fp32, why = 32, "Zen2+: two 256-bit FMA pipes (Zen4 runs AVX-512 as 2x256) = 2 x 8 lanes x 2"
    elif "avx512f" in flags:
        fp32, why = 64, "two 512-bit FMA ports = 2 x 16 lanes x 2"
    elif "fma" in flags:
        fp32, why = 32, "two 256-bit FMA ports = 2 x 8 lanes x 2"
    else:
        fp32, why = 8, "SSE: 4 lanes x (mul + add)"
    if "avx512_vnni" in flags or "avx_vnni" in flags:
        int8, why8 = 4 * fp32, "VNNI: a dot-product instruction does 4 u8xs8 products per 32-bit lane, 4x FP32"
    else:
        int8, why8 = 2 * fp32, "no VNNI: vpmaddubsw gives 2 u8xs8 products per 16-bit lane, at best 2x FP32"
    return mhz, source, fp32, why, int8, why8


def roofline(models_path, gflop, model):
    gflop = float(gflop)
    mhz, source, fp32, why, int8, why8 = cpu()
    print(f"  peak per core at {mhz:.0f} MHz ({source}):")
    print(f"    FP32 {fp32} FLOP/cycle = {mhz * fp32 / 1e3:.1f} GFLOP/s ({why})")
    print(f"    INT8 {int8} op/cycle = {mhz * int8 / 1e3:.1f} GOP/s ({why8})")
    print(f"  {model}: {gflop:.1f} GFLOP per swap (multiply-adds x 2 of its convolutions and matrix products)")
    print(f"  {'prec':<5} {'engine':<6} {'thr':>3} {'median ms':>10} {'GFLOP/s':>8} {'peak':>8} {'of peak':>8}")
    best = 0.0
    for item in json.load(open(models_path)):
        if item["base"] != model:
            continue
        r, prec = item["row"], item["precision"]
        achieved = gflop / (r["median_ms"] / 1e3)
        peak = mhz * (int8 if prec == "int8" else fp32) / 1e3 * r["threads"]
        print(f"  {prec:<5} {r['engine']:<6} {r['threads']:>3} {r['median_ms']:>10.1f} {achieved:>8.1f} "
              f"{peak:>8.1f} {achieved / peak * 100:>7.1f}%")
        if prec == "fp32":
            best = max(best, achieved / r["threads"])
    if best > mhz * fp32 / 1e3:
        print(f"  the best FP32 row beats the peak at {mhz:.0f} MHz, so the cores run faster than that: at least "
              f"{best / fp32 * 1e3:.0f} MHz; set BENCH_PEAK_MHZ to the CPU's boost clock")


if __name__ == "__main__":
    cmds = {"pipeline": pipeline, "roofline": roofline}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](*sys.argv[2:])
