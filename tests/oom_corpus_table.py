#!/usr/bin/env python3
"""The diagnose corpus (tests/data/oom/index.json) against a built binary:
per format and per cause, how many logs are read right (count, cause and
every hand-read field of the first message), as a Markdown table.

    python3 tests/oom_corpus_table.py build/oomplan

The [diagnose] tests hold every entry; this table is for docs and notes, and
for comparing two binaries on the same corpus."""

import collections
import json
import pathlib
import subprocess
import sys

UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
SIZES = {"requested": "requested_bytes", "capacity": "capacity_bytes",
         "free": "free_bytes", "process": "process_bytes",
         "allocated": "allocated_bytes",
         "reserved_unallocated": "reserved_unallocated_bytes",
         "reserved_total": "reserved_total_bytes", "allowed": "allowed_bytes"}
PLAIN = ["line", "format", "device", "gpu_index", "source", "max_seq_len",
         "kv_tokens", "estimated_max_model_len"]


def printed_bytes(text):
    """'3.00 GiB' as printed, rounded half up to the byte (exact decimals)."""
    number, unit = text.split(" ")
    whole, _, frac = number.partition(".")
    scale = 10 ** len(frac)
    mantissa = int(whole + frac)
    return (mantissa * UNITS[unit] + scale // 2) // scale


def right(entry, out):
    if out.get("count") != entry["count"] or out.get("cause") != entry["cause"]:
        return False
    if not out.get("messages"):
        return False
    got, want = out["messages"][0], entry["first"]
    for key in PLAIN:
        if got.get(key) != want.get(key):
            return False
    for key, field in SIZES.items():
        expected = printed_bytes(want[key]) if key in want else None
        if got.get(field) != expected:
            return False
    others = want.get("other_processes")
    expected = sum(printed_bytes(p) for p in others) if others else None
    if got.get("other_processes_bytes") != expected:
        return False
    if "gpu_util" in want:
        return abs((got.get("gpu_util") or 0) - want["gpu_util"]) < 1e-9
    return got.get("gpu_util") is None


def main():
    binary = sys.argv[1]
    data = pathlib.Path(__file__).parent / "data" / "oom"
    index = json.loads((data / "index.json").read_text())
    by_format = collections.defaultdict(lambda: [0, 0])
    by_cause = collections.defaultdict(lambda: [0, 0])
    for entry in index["messages"]:
        run = subprocess.run([binary, "diagnose", "--json",
                              str(data / entry["file"])],
                             capture_output=True, text=True, check=False)
        try:
            out = json.loads(run.stdout)
        except json.JSONDecodeError:
            out = {}
        ok = right(entry, out)
        for table, key in ((by_format, entry["first"]["format"]),
                           (by_cause, entry["cause"])):
            table[key][0] += ok
            table[key][1] += 1
    for title, table in (("format", by_format), ("cause", by_cause)):
        print(f"| {title} | read right |\n|---|---|")
        for key in sorted(table):
            ok, total = table[key]
            print(f"| {key} | {ok} of {total} |")
        print()
    total = sum(t for _, t in by_format.values())
    ok = sum(o for o, _ in by_format.values())
    print(f"{ok} of {total} logs read right")


if __name__ == "__main__":
    main()
