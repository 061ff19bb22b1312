"""benches/arm-cost/report.py: the ARM cost table's ratios, and its rule
that fusiond's default never executes more instructions than stock tract."""
import json
import subprocess
import sys
from pathlib import Path

REPORT = Path(__file__).resolve().parents[2] / "benches" / "arm-cost" / "report.py"


def row(cpu, name, config, insns, kernels=()):
    return {"cpu": cpu, "arch": "aarch64", "kind": "model", "name": name, "config": config,
            "insns": insns, "insns_load_and_warm_up": 0, "kernels": list(kernels), "faces": None,
            "engine": "tract"}


def report(tmp_path, rows):
    rows_path = tmp_path / "rows.jsonl"
    rows_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = subprocess.run([sys.executable, str(REPORT), str(rows_path), str(tmp_path / "table.md")],
                          capture_output=True, text=True)
    summary = json.loads((tmp_path / "table.json").read_text())
    return done, summary


def test_ratios_goals_and_kernels_are_in_the_table(tmp_path):
    done, summary = report(tmp_path, [
        row("cortex-a76", "yunet", "stock", 400e6),
        row("cortex-a76", "yunet", "default", 300e6, ["arm64simd_mmm_f32_8x8_gen ×3"]),
        row("cortex-a76", "yunet", "int8", 150e6),
        row("cortex-a76", "yunet", "ort", 250e6),
    ])
    assert done.returncode == 0, done.stderr
    ratios = {r["ratio"]: r for r in summary["ratios"]}
    assert ratios["default / stock"]["value"] == 0.75 and ratios["default / stock"]["met"]
    assert ratios["INT8 / FP32"]["value"] == 0.5 and ratios["INT8 / FP32"]["met"]
    assert ratios["tract / ORT"]["value"] == 1.2 and ratios["tract / ORT"]["met"]
    assert "arm64simd_mmm_f32_8x8_gen ×3" in done.stdout
    assert "0.75× ✓" in (tmp_path / "table.md").read_text()


def test_a_default_above_stock_fails_and_says_where(tmp_path):
    done, summary = report(tmp_path, [
        row("cortex-a7", "scrfd", "stock", 100e6),
        row("cortex-a7", "scrfd", "default", 110e6),
    ])
    assert done.returncode == 1
    assert "cortex-a7 scrfd: default / stock 1.100" in done.stderr
    assert not summary["ratios"][0]["met"]


def test_int8_above_fp32_misses_its_goal_on_a72_without_failing(tmp_path):
    done, summary = report(tmp_path, [
        row("cortex-a72", "arcface", "stock", 100e6),
        row("cortex-a72", "arcface", "default", 90e6),
        row("cortex-a72", "arcface", "int8", 95e6),
    ])
    assert done.returncode == 0
    int8 = next(r for r in summary["ratios"] if r["ratio"] == "INT8 / FP32")
    assert int8["goal"] == 1.0 and not int8["met"]


def test_a_small_model_within_the_counts_noise_meets_the_rule(tmp_path):
    done, summary = report(tmp_path, [
        row("cortex-a7", "landmark68", "stock", 31.8e6),
        row("cortex-a7", "landmark68", "default", 32.1e6),
    ])
    assert done.returncode == 0, done.stderr
    assert summary["ratios"][0]["met"]
