#!/usr/bin/env bash
# Rewrites tests/golden/expected/ from the current build after an intended
# change of output: run it, read `git diff tests/golden`, commit both together.
# Usage: tests/golden/regen.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
cmake --build "$build" --target oomplan_tests >/dev/null
OOMPLAN_GOLDEN_UPDATE=1 "$build/tests/oomplan_tests" "[golden]" >/dev/null
git status --short tests/golden | head -n 20
echo "tests/golden: $(ls tests/golden/expected | wc -l) expected outputs"
