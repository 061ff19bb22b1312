"""Writes docs/configuration.md from config/fusiond.toml, the packaged
config that lists every key with its default and its comment (optional
keys commented out): one table per section, a row per key.
tests/it/docs.rs checks that the page names every key of the config once
and no other; rerun this after a config change:

    python3 tests/docs/configuration.py > docs/configuration.md
"""
import re
import sys
from pathlib import Path

KEY = re.compile(r"^#?\s*([a-z0-9_]+) = (.*)$")


def rows(text):
    """(section, intro, [(key, default, doc, optional)]) in file order."""
    sections, doc = [], []
    current = ("", [], [])
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and not line.startswith("[["):
            sections.append(current)
            current = (line.strip("[]"), doc, [])
            doc = []
        elif line.startswith("[["):
            sections.append(current)
            current = (line.strip("[]") + " (repeated)", doc, [])
            doc = []
        elif KEY.match(line):
            key, value = KEY.match(line).groups()
            current[2].append((key, value.strip(), " ".join(doc), line.startswith("#")))
            doc = []
        elif line.startswith("#"):
            doc.append(line.lstrip("#").strip())
        elif not line:
            if doc and not current[2]:
                current[1].extend(doc)
                doc = []
    sections.append(current)
    return [s for s in sections if s[0] or s[2]]


def main():
    repo = Path(__file__).resolve().parents[2]
    text = (repo / "config/fusiond.toml").read_text()
    out = ["# Configuration", "",
           "Every key of `/etc/fusiond/fusiond.toml`, with its default and what it does. The",
           "packaged file (`config/fusiond.toml`) holds the same keys and comments; this page is",
           "written from it by `tests/docs/configuration.py`, and `tests/it/docs.rs` checks that",
           "it names every key once and no other. A key left out takes its default; a key the",
           "daemon does not know is refused at start with its name. Files in",
           "`/etc/fusiond/conf.d/*.toml` are layered on top in name order. Optional keys",
           "(commented out in the packaged file) show their example value in *italics*.", ""]
    seen = set()
    for section, intro, keys in rows(text):
        base = section.replace(" (repeated)", "")
        if base in seen:
            # A second [[tier]]: an example, its keys already in the table.
            listed = ", ".join(f"`{k}` = `{v}`" for k, v, _, _ in keys)
            out += [f"The packaged file's next `[[{base}]]`: {listed}.", ""]
            continue
        seen.add(base)
        out.append(f"## `[{base}]`" + (" (one per tier)" if "repeated" in section else ""))
        out.append("")
        if intro:
            out += [" ".join(intro), ""]
        if keys:
            out += ["| key | default | what it does |", "|---|---|---|"]
            for i, (key, value, doc, optional) in enumerate(keys):
                value = value.replace("|", "\\|")
                shown = f"*`{value}`*" if optional else f"`{value}`"
                doc = doc.replace("|", "\\|") or ("as the key above" if i else "see the section above")
                out.append(f"| `{base}.{key}` | {shown} | {doc} |")
            out.append("")
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()
