#!/usr/bin/env python3
"""ONNX Runtime's per-node profile of a model, summed the way `fusiond
profile` sums tract's: by operator and by ONNX node (the node names ORT's
profiler reports; a fused node keeps the name of the node it grew from).
With --tract, the two side by side by ONNX node, as a Markdown table.

  ort_profile.py MODEL.onnx --shape NAME=1,3,640,640 [--shape ...]
                 [--runs 20] [--threads 1] [--top 12] [--json] [--level all|extended|basic|none]
                 [--tract TRACT.json]    (`fusiond profile MODEL --json` of the same model;
                                          its inputs are the default --shape)

Inputs are filled with the same pseudo-random sequence in [0, 1) as
`fusiond profile` uses, one warm-up run first. Each node's time is the
median over the runs of its time per run; the total is the median run's
sum of node times.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np
import onnx
import onnxruntime as ort


def filler(shapes):
    """fusiond profile's xorshift32 sequence, input after input."""
    x = 0x9E3779B9
    out = {}
    for name, shape in shapes:
        n = int(np.prod(shape))
        vals = np.empty(n, np.float32)
        for i in range(n):
            x ^= (x << 13) & 0xFFFFFFFF
            x ^= x >> 17
            x ^= (x << 5) & 0xFFFFFFFF
            vals[i] = (x >> 8) / float(1 << 24)
        out[name] = vals.reshape(shape)
    return out


def onnx_names(model):
    """Maps the node names ORT's profiler reports to the file's node names.
    ORT's NCHWc layout pass rewrites nodes under the name of their first
    output plus `_nchwc`; the reorders it inserts belong to no ONNX node."""
    graph = onnx.load(model, load_external_data=False).graph
    names = {n.name for n in graph.node if n.name}
    by_output = {o: (n.name or o) for n in graph.node for o in n.output[:1]}

    def name(reported, op):
        base = reported[: -len("_nchwc")] if reported.endswith("_nchwc") else reported
        if base in names:
            return base
        if base in by_output:
            return by_output[base]
        return f"(ORT {op})"

    return name


LEVELS = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL, "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
          "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC, "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}


def profile(model, shapes, runs, threads, level="all"):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = LEVELS[level]
    start = time.perf_counter()
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - start) * 1e3
    feed = filler(shapes)
    sess.run(None, feed)
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    sess.run(None, feed)  # the profiled session's own warm-up, dropped below
    for _ in range(runs):
        sess.run(None, feed)
    with open(sess.end_profiling()) as f:
        events = json.load(f)
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e["name"] == "model_run")
    windows = windows[1:]
    per_run = [defaultdict(float) for _ in windows]
    ops, onnx_of = {}, {}
    onnx_node = onnx_names(model)
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        node = e["name"][: -len("_kernel_time")]
        ops[node] = e["args"].get("op_name", "?")
        onnx_of[node] = onnx_node(node, ops[node])
        for i, (start, end) in enumerate(windows):
            if start <= e["ts"] <= end:
                per_run[i][node] += e["dur"] / 1000.0
    return {**summarize(per_run, ops, onnx_of), "load_ms": load_ms}


def summarize(per_run, ops, onnx_of):
    total = statistics.median(sum(r.values()) for r in per_run)

    def shares(key):
        acc = defaultdict(lambda: [0.0] * len(per_run))
        nodes, op_of = defaultdict(int), {}
        for node, op in ops.items():
            nodes[key(node)] += 1
            op_of[key(node)] = op
        for i, run in enumerate(per_run):
            for node, ms in run.items():
                acc[key(node)][i] += ms
        rows = [{"name": k, "op": op_of[k], "nodes": nodes[k], "ms": statistics.median(v),
                 "percent": 100 * statistics.median(v) / total if total else 0} for k, v in acc.items()]
        return sorted(rows, key=lambda r: (-r["ms"], r["name"]))

    return {"runs": len(per_run), "total_ms": total,
            "by_op": shares(lambda node: ops[node]), "by_onnx_node": shares(lambda node: onnx_of[node])}


def side_by_side(ort_p, tract_p, top):
    print("| ONNX node | ORT op | ORT ms | tract ops | tract ms | tract / ORT |")
    print("|---|---|---|---|---|---|")
    rows = sorted(tract_p["by_onnx_node"], key=lambda r: -r["ms"])[:top]
    ort_nodes = {r["name"]: r for r in ort_p["by_onnx_node"]}
    for t in rows:
        o = ort_nodes.get(t["name"])
        o_ms = f"{o['ms']:.3f}" if o else "(fused)"
        ratio = f"{t['ms'] / o['ms']:.1f}×" if o and o["ms"] > 0 else ""
        print(f"| {t['name']} | {o['op'] if o else ''} | {o_ms} | {t['op']} ({t['nodes']}) | {t['ms']:.3f} | {ratio} |")
    print(f"| **whole run** | | {ort_p['total_ms']:.2f} | | {tract_p['total_ms']:.2f} | "
          f"{tract_p['total_ms'] / ort_p['total_ms']:.2f}× |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--shape", action="append", help="NAME=d0,d1,... (repeat per input; default: --tract's inputs)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--level", choices=LEVELS, default="all",
                    help="ONNX Runtime's graph optimisation level (all: with the NCHWc layout pass, its default)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tract", help="`fusiond profile MODEL --json` output for the same model")
    ap.add_argument("--saved", help="this script's own --json output: print the table from it, profile nothing")
    a = ap.parse_args()
    tract = None
    if a.tract:
        with open(a.tract) as f:
            tract = json.load(f)
    if a.shape:
        shapes = [(s.split("=")[0], [int(d) for d in s.split("=")[1].split(",")]) for s in a.shape]
    elif tract:
        shapes = [(i["name"], i["shape"]) for i in tract["inputs"]]
    else:
        ap.error("give --shape, or --tract with the inputs fusiond profile used")
    if a.saved:
        with open(a.saved) as f:
            p = json.load(f)["profile"]
    else:
        p = profile(a.model, shapes, a.runs, a.threads, a.level)
    if a.json:
        print(json.dumps({"model": a.model, "engine": "ort", "threads": a.threads, "level": a.level, "profile": p}))
    elif tract:
        side_by_side(p, tract["profile"], a.top)
    else:
        print(f"{a.model} on onnxruntime {ort.__version__}, {a.threads} thread(s), optimisation level {a.level}: "
              f"{p['runs']} profiled runs, "
              f"median total {p['total_ms']:.2f} ms")
        for what, rows, top in (("operator", p["by_op"], 10**9), ("ONNX node", p["by_onnx_node"], a.top)):
            print(f"  {'by ' + what:<40} {'op':<24} {'nodes':>5} {'ms':>9} {'%':>6}")
            for r in rows[:top]:
                print(f"  {r['name']:<40} {r['op']:<24} {r['nodes']:>5} {r['ms']:>9.3f} {r['percent']:>6.1f}")


if __name__ == "__main__":
    sys.exit(main())
