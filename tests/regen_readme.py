#!/usr/bin/env python3
"""Regenerates the examples of README.md and docs/*.md: every ```text block
whose first line starts with "$ oomplan " gets, after each command, what the
built binary prints (stdout, then stderr), run from the repository root. The
test "cli: every README example prints what the binary prints" checks the
same blocks in the same pages.

Usage: python3 tests/regen_readme.py [build/oomplan]
"""
import os
import shlex
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
binary = str(Path(sys.argv[1]).resolve()) if len(sys.argv) > 1 else str(root / "build" / "oomplan")


hermetic = dict(os.environ, HF_HUB_CACHE="", HUGGINGFACE_HUB_CACHE="", HF_HOME="",
                XDG_CACHE_HOME="", HOME="")


def regenerate(page):
    lines = page.read_text().split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if line != "```text" or i >= len(lines) or not lines[i].startswith("$ oomplan "):
            continue
        # An example block: keep the commands, replace what follows each.
        while i < len(lines) and lines[i] != "```":
            if lines[i].startswith("$ oomplan "):
                command = lines[i]
                # From the repository root, as the test runs them: examples
                # name files by their repository path (tests/data/...).
                # No Hugging Face cache, as the test runs them (run_binary).
                run = subprocess.run([binary] + shlex.split(command[len("$ oomplan "):]),
                                     capture_output=True, text=True, cwd=root, env=hermetic)
                out.append(command)
                out.extend((run.stdout + run.stderr).rstrip("\n").split("\n"))
            i += 1
    text = "\n".join(out)
    if text != page.read_text():
        page.write_text(text)
        print(f"rewrote {page.relative_to(root)}")


for page in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
    regenerate(page)
