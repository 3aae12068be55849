#!/usr/bin/env python3
"""Writes the accuracy tables of docs/accuracy.md from check.py's results.

Runs the validation harness (check.py --json) with the built binary over the
published measurements and replaces what lies between the lines
"<!-- oomplan-accuracy:begin -->" and "<!-- oomplan-accuracy:end -->" of
docs/accuracy.md: the summary per category, the error per metric, the
median over the training peaks, each check that misses with its cause
from tests/data/validation/known_gaps.json, and the GPU measurements of
tests/data/measured re-planned. No number there is typed.

    python3 tests/accuracy_tables.py [--bin build/oomplan] [--validation DIR] [--check]

--validation DIR holds check.py and public.json: ../shared/validation beside
the clone when it exists, else the copy in tests/data/validation. --check
writes nothing: it exits 1 when the committed tables differ from what the
binary gives now (the test "accuracy_tables" runs it on the copy).
"""
import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "accuracy.md"
BEGIN = "<!-- oomplan-accuracy:begin -->"
END = "<!-- oomplan-accuracy:end -->"
GAPS = ROOT / "tests" / "data" / "validation" / "known_gaps.json"

# What each category of public.json holds (its README, "Categories").
CATEGORIES = {
    "weights": "weights (vLLM, HF, papers)",
    "kv": "kv (bytes per token)",
    "vllm_kv": "vllm_kv (vLLM budget terms, KV pool, tokens)",
    "vllm_verdict": "vllm_verdict",
    "activations": "activations (vLLM profile, Korthikanti)",
    "training_full": "training_full (peaks, ZeRO model states)",
    "lora": "lora",
    "qlora": "qlora",
    "inference": "inference",
    "verdict": "verdict (fits / OOM)",
}
TRAINING = ("training_full", "lora", "qlora")


def default_validation():
    shared = ROOT.parent / "shared" / "validation"
    if (shared / "check.py").exists() and (shared / "public.json").exists():
        return shared
    return ROOT / "tests" / "data" / "validation"


def run_checks(binary, validation):
    """check.py's results, one dict per check (its --json output)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        run = subprocess.run(
            [sys.executable, str(validation / "check.py"), "--bin", binary,
             str(validation / "public.json"), "--json", str(out), "--report-only"],
            capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"accuracy_tables.py: check.py failed:\n{run.stderr}")
        return json.loads(out.read_text())


def pct(value):
    return f"{100 * value:.1f} %"


def numeric(results):
    return [r for r in results if r["error"] is not None]


def verdicts(results):
    return [r for r in results if isinstance(r["expected"], bool)]


def passed(results):
    return sum(r["status"] == "PASS" for r in results)


def category_table(results):
    lines = ["| category | checks | median \\|error\\| | p90 \\|error\\| | within tolerance |",
             "|---|---|---|---|---|"]
    order = [c for c in CATEGORIES if any(r["category"] == c for r in results)]
    order += sorted({r["category"] for r in results} - set(order))
    for cat in order:
        rs = [r for r in results if r["category"] == cat]
        errs = [abs(r["error"]) for r in numeric(rs)]
        if errs:
            # check.py's statistics: the median, and the nearest-rank p90.
            p90 = sorted(errs)[max(0, math.ceil(90 / 100 * len(errs)) - 1)]
            cells = [pct(statistics.median(errs)), pct(p90), str(passed(rs))]
        else:
            cells = ["–", "–", f"{passed(rs)} right"]
        lines.append(f"| {CATEGORIES.get(cat, cat)} | {len(rs)} | " + " | ".join(cells) + " |")
    return lines


def metric_name(metric):
    """stages.0.weights_bytes and stages.3.weights_bytes are one metric."""
    parts = ["*" if p.isdigit() else p for p in metric.split(".")]
    name = ".".join(parts)
    if "+" in name:
        return "model states (weights + gradients + optimizer)"
    return name


def metric_table(results):
    lines = ["| category | metric | checks | median \\|error\\| | largest \\|error\\| | within tolerance |",
             "|---|---|---|---|---|---|"]
    groups = {}
    for r in numeric(results):
        groups.setdefault((r["category"], metric_name(r["metric"])), []).append(r)
    order = list(CATEGORIES)
    for (cat, metric), rs in sorted(groups.items(),
                                    key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order
                                                    else len(order), kv[0][1])):
        errs = [abs(r["error"]) for r in rs]
        lines.append(f"| {cat} | `{metric}` | {len(rs)} | {pct(statistics.median(errs))} | "
                     f"{pct(max(errs))} | {passed(rs)} |")
    return lines


def training_peaks(results):
    """The training rows that measure a peak (not the ZeRO model-state sums)."""
    rows = [r for r in numeric(results)
            if r["category"] in TRAINING and "+" not in r["metric"]]
    errs = [abs(r["error"]) for r in rows]
    return (f"Median |error| over the {len(rows)} training peak rows (full, LoRA and QLoRA; the "
            f"ZeRO / DeepSpeed model-state rows excluded): {pct(statistics.median(errs))}.")


def misses(results):
    reasons = {g["id"]: g["reason"] for g in json.loads(GAPS.read_text())["gaps"]}
    lines = []
    for r in results:
        if r["status"] == "PASS":
            continue
        error = f"{100 * r['error']:+.1f} %" if r["error"] is not None else r["status"].lower()
        cause = reasons.get(r["id"], "not listed in known_gaps.json")
        lines.append(f"- `{r['id']}` ({r['category']}, {error}): {cause}")
    ids = {r["id"] for r in results}
    for gap in reasons:
        # The gaps of the development set are not in these results.
        if gap in ids and not any(r["id"] == gap and r["status"] != "PASS" for r in results):
            lines.append(f"- `{gap}` is listed in known_gaps.json but passes now")
    return lines


def measured_rows(binary):
    """Each GPU measurement of tests/data/measured re-planned by the binary, as
    test_validation.cpp does: the recorded config, predicted.args, and the
    allocated peak against torch.cuda.max_memory_allocated()."""
    rows = []
    for path in sorted((ROOT / "tests" / "data" / "measured").glob("*.json")):
        doc = json.loads(path.read_text())
        for result in doc["results"]:
            if "failed" in result or "measured" not in result:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "config.json").write_text(json.dumps(result["config"]))
                run = subprocess.run([binary, tmp] + result["predicted"]["args"] + ["--json"],
                                     capture_output=True, text=True)
            measured = result["measured"]
            row = {"file": path.name, "gpu": doc["gpu"], "entry": " ".join(result["entry"]),
                   "tolerance": result.get("tolerance", 0.15), "known": result.get("known_gap")}
            if run.returncode == 2:
                rows.append(dict(row, status="rejected", detail=run.stderr.strip()))
                continue
            plan = json.loads(run.stdout)
            if measured.get("oom"):
                ok = not plan["fits"]
                rows.append(dict(row, status="PASS" if ok else "FAIL", error=None,
                                 measured="OOM", planned="fits" if plan["fits"] else "does not fit"))
                continue
            want = measured["allocated_bytes"]
            got = plan["peak"]["allocated_bytes"]
            ok = abs(got - want) <= row["tolerance"] * want
            rows.append(dict(row, status="PASS" if ok else "FAIL", error=(got - want) / want,
                             measured=f"{want / 2**30:.2f}", planned=f"{got / 2**30:.2f}"))
    return rows


def measured_table(rows):
    if not rows:
        return ["No GPU measurement is recorded in tests/data/measured yet."]
    errs = [abs(r["error"]) for r in rows if r.get("error") is not None]
    files = sorted({f"`tests/data/measured/{r['file']}` ({r['gpu']})" for r in rows})
    out = [f"{passed(rows)} of {len(rows)} setups measured by `tests/measure/measure.py --matrix` "
           f"({', '.join(files)}) are planned within their tolerance; median |error| of the "
           f"allocated peak {pct(statistics.median(errs))}, largest {pct(max(errs))}.", "",
           "| setup (measure.py arguments) | measured GiB | planned GiB | error | within tolerance |",
           "|---|---|---|---|---|"]
    for r in rows:
        if r["status"] == "rejected":
            out.append(f"| `{r['entry']}` | | | | oomplan rejects it: {r['detail']} |")
            continue
        error = f"{100 * r['error']:+.1f} %" if r.get("error") is not None else ""
        verdict = ("yes" if r["status"] == "PASS" else "no") + (
            f" (known gap: {r['known']})" if r["known"] else "")
        out.append(f"| `{r['entry']}` | {r['measured']} | {r['planned']} | {error} | "
                   f"{verdict} (±{100 * r['tolerance']:.0f} %) |")
    return out


def tables(results, measured):
    out = [BEGIN,
           "<!-- Written by python3 tests/accuracy_tables.py from check.py's results; do not edit. -->",
           "",
           f"{passed(results)} of {len(results)} checks pass.",
           "",
           "### By category",
           ""]
    out += category_table(results)
    out += ["", "### By metric", "",
            "The numeric checks of each category, by the plan field they compare "
            "(`*`: any pipeline stage).", ""]
    out += metric_table(results)
    out += ["", training_peaks(results), "", "### The checks oomplan misses", ""]
    out += misses(results) or ["None."]
    out += ["", "### Measured on a GPU", ""]
    out += measured_table(measured)
    out += [END]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "oomplan"), help="oomplan binary")
    ap.add_argument("--validation", type=Path, default=None,
                    help="folder with check.py and public.json")
    ap.add_argument("--check", action="store_true",
                    help="compare with docs/accuracy.md instead of writing it")
    opts = ap.parse_args()
    validation = opts.validation or default_validation()
    binary = str(Path(opts.bin).resolve())
    generated = tables(run_checks(binary, validation), measured_rows(binary))
    page = PAGE.read_text()
    if BEGIN + "\n" not in page or END + "\n" not in page:
        sys.exit(f"accuracy_tables.py: {PAGE} lacks the lines {BEGIN} and {END}")
    head, rest = page.split(BEGIN + "\n", 1)
    tail = rest.split(END + "\n", 1)[1]
    updated = head + generated + tail
    if opts.check:
        if updated != page:
            print(f"docs/accuracy.md's tables differ from what {opts.bin} gives on "
                  f"{validation}; regenerate them with: python3 tests/accuracy_tables.py "
                  f"--bin {opts.bin}", file=sys.stderr)
            return 1
        return 0
    if updated != page:
        PAGE.write_text(updated)
        print("rewrote docs/accuracy.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
