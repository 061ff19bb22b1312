#!/usr/bin/env python3
"""The Markdown tables of benches/profile.sh, from the JSON its rounds wrote
(MODEL.{fused,stock,ort}.ROUND.json in OUT_DIR).

  profile_summary.py OUT_DIR MODEL [MODEL ...]

Per model, each round ran tract with fusiond's ops (`fused`), tract's own
ops (`stock`, --tract-stock-ops) and ONNX Runtime, one after the other, so
that all three see the same drift of a shared machine. A round's figure is
its median run (the sum of the node times of that run); the tables give the
median round and the range over rounds, and the ratios of the medians.
"""
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from ort_profile import side_by_side  # noqa: E402

KINDS = ("stock", "fused", "ort")


def rounds(out, model, kind):
    files = sorted(out.glob(f"{model}.{kind}.*.json"), key=lambda p: int(p.stem.rsplit(".", 1)[1]))
    saved = [json.loads(p.read_text()) for p in files]
    # fusiond profile writes load_ms beside the profile, ort_profile.py in it.
    return [{"load_ms": j.get("load_ms"), **j["profile"]} for j in saved]


def median_round(profiles):
    """The round whose total is the median (the lower one of an even count)."""
    ordered = sorted(profiles, key=lambda p: p["total_ms"])
    return ordered[(len(ordered) - 1) // 2]


def totals(out, models):
    print("| model | tract, tract's ops | tract, fusiond's ops | ONNX Runtime | fusiond's ops speed-up | tract / ORT |")
    print("|---|---|---|---|---|---|")
    for model in models:
        t = {k: [p["total_ms"] for p in rounds(out, model, k)] for k in KINDS}
        med = {k: statistics.median(v) for k, v in t.items()}
        cell = lambda k: f"{med[k]:.1f} ms ({min(t[k]):.1f}–{max(t[k]):.1f})"
        print(f"| {model} | {cell('stock')} | {cell('fused')} | {cell('ort')} | "
              f"{med['stock'] / med['fused']:.2f}× | {med['fused'] / med['ort']:.2f}× |")
    n = len(rounds(out, models[0], "fused"))
    print(f"\nMedian of {n} rounds (min–max); each round's figure is the median of its runs.")


def int8_against_fp32(out, models):
    """FP32 / INT8 of each model that has its `_int8` twin among `models`,
    per engine and ops: run time, then load time (above 1: INT8 is faster)."""
    pairs = [(m, f"{m}_int8") for m in models if f"{m}_int8" in models]
    if not pairs:
        return
    for key, what in (("total_ms", "run"), ("load_ms", "load (parse, optimise, plan)")):
        print(f"\n### INT8 against FP32, {what}: FP32 ms / INT8 ms of the median rounds (above 1: INT8 is faster)\n")
        print("| model | tract, tract's ops | tract, fusiond's ops | ONNX Runtime |")
        print("|---|---|---|---|")
        for fp32, int8 in pairs:
            cells = []
            for kind in ("stock", "fused", "ort"):
                a = statistics.median(p[key] for p in rounds(out, fp32, kind))
                b = statistics.median(p[key] for p in rounds(out, int8, kind))
                cells.append(f"{a / b:.2f}× ({a:.1f} / {b:.1f} ms)")
            print(f"| {fp32} | {' | '.join(cells)} |")


def by_op(out, model, top):
    fused, stock = median_round(rounds(out, model, "fused")), median_round(rounds(out, model, "stock"))
    f = {r["name"]: r for r in fused["by_op"]}
    s = {r["name"]: r for r in stock["by_op"]}
    names = sorted(set(f) | set(s), key=lambda n: -max(f.get(n, {}).get("ms", 0), s.get(n, {}).get("ms", 0)))
    print("| tract op | nodes | tract's ops ms | fusiond's ops ms | % of fusiond's total |")
    print("|---|---|---|---|---|")
    for name in names[:top]:
        a, b = s.get(name), f.get(name)
        nodes = (b or a)["nodes"]
        cell = lambda r: f"{r['ms']:.2f}" if r else "–"
        print(f"| {name} | {nodes} | {cell(a)} | {cell(b)} | {b['percent']:.1f} |" if b else
              f"| {name} | {nodes} | {cell(a)} | – | – |")
    print(f"| **total** | | {stock['total_ms']:.2f} | {fused['total_ms']:.2f} | 100 |")


def main():
    out, models = Path(sys.argv[1]), sys.argv[2:]
    print("### Totals\n")
    totals(out, models)
    int8_against_fp32(out, models)
    for model in models:
        print(f"\n### {model}: tract's operators, tract's own ops against fusiond's (the median round)\n")
        by_op(out, model, 10)
        print(f"\n### {model}: by ONNX node, tract (fusiond's ops) against ONNX Runtime (the median rounds)\n")
        side_by_side(median_round(rounds(out, model, "ort")), median_round(rounds(out, model, "fused")), 10)


if __name__ == "__main__":
    main()
