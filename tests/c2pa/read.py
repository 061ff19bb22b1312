"""Reads the C2PA manifest of each JPEG named on the command line with
c2pa-python (the C2PA reference SDK's Python binding, independent of the
daemon's build) and prints one JSON line per file: the validation state,
the failure codes, the signer's certificate subject, and the actions of the
active manifest. A file without a manifest prints {"manifest": false}.

    python tests/c2pa/read.py FILE...
"""

import json
import sys

import c2pa


def read(path):
    try:
        reader = c2pa.Reader(path)
    except c2pa.C2paError as e:
        return {"manifest": False, "error": str(e)}
    store = json.loads(reader.json())
    active = store["manifests"][store["active_manifest"]]
    actions = []
    for a in active.get("assertions", []):
        if a["label"].startswith("c2pa.actions"):
            actions += a["data"].get("actions", [])
    status = store.get("validation_results", {}).get("activeManifest", {})
    return {
        "manifest": True,
        "state": store.get("validation_state"),
        "failures": [s["code"] for s in status.get("failure", [])],
        "successes": [s["code"] for s in status.get("success", [])],
        "issuer": active.get("signature_info", {}).get("issuer"),
        "common_name": active.get("signature_info", {}).get("common_name"),
        "alg": active.get("signature_info", {}).get("alg"),
        "generator": [g.get("name") for g in active.get("claim_generator_info", [])],
        "actions": [{"action": a.get("action"), "digitalSourceType": a.get("digitalSourceType")} for a in actions],
    }


for path in sys.argv[1:]:
    print(json.dumps({"file": path, **read(path)}))
