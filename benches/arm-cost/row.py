"""One row of benches/arm-cost.sh's rows.jsonl, from two counts and what
fusiond printed: instructions per run are (cn - c0) / runs.

usage: row.py CPU ARCH KIND NAME CONFIG C0 CN RUNS FUSIOND_STDOUT
"""
import json
import sys

cpu, arch, kind, name, config, c0, cn, runs, stdout = sys.argv[1:]
said = json.loads(open(stdout).read().strip().splitlines()[-1])
print(json.dumps({
    "cpu": cpu, "arch": arch, "kind": kind, "name": name, "config": config,
    "insns": (int(cn) - int(c0)) / int(runs), "insns_load_and_warm_up": int(c0),
    "kernels": said.get("kernels", []), "faces": said.get("faces"),
    "engine": said.get("placement", {}).get("engine") or said.get("engine"),
}))
