#!/usr/bin/env bash
# The GitHub Action's script (.ci/action.sh, which action.yml runs) on the
# test configs, with the binary just built: a fitting pair passes and writes
# the job summary and the exit-code output; a plan that does not fit fails
# the step with exit 1; a pattern that matches nothing is exit 2.
# Usage: tests/test_action.sh BUILT_OOMPLAN   (from the repository root)
set -uo pipefail
export OOMPLAN_BIN=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

run() {  # run EXPECTED_EXIT: .ci/action.sh with the INPUT_* of the caller
  : >"$work/summary"; : >"$work/output"
  GITHUB_STEP_SUMMARY="$work/summary" GITHUB_OUTPUT="$work/output" \
    bash .ci/action.sh >"$work/stdout" 2>"$work/stderr"
  local code=$?
  [ "$code" -eq "$1" ] || { cat "$work/stderr"; fail "exit $code, expected $1"; }
}

# Two files, one by a ** glob, on 8 x H100: both fit.
INPUT_FILES="tests/data/configs/axolotl/examples/llama-3/qlora.yml
tests/data/configs/torchtune/**/8B_lora_single_device.yaml" INPUT_GPUS=8xH100 run 0
grep -q '^### oomplan check: .* all 2 plans fit' "$work/summary" || fail "no summary"
grep -qx 'exit-code=0' "$work/output" || fail "no exit-code output"

# Full fine-tuning of Llama 3.1 8B without sharding does not fit an H100.
INPUT_FILES=tests/data/configs/axolotl/examples/llama-3/fft-8b.yaml \
  INPUT_GPUS=8xH100 run 1
grep -q 'does not fit' "$work/summary" || fail "no failing summary"
grep -qx 'exit-code=1' "$work/output" || fail "no exit-code=1"

# --model and extra arguments reach oomplan check.
INPUT_FILES=tests/data/configs/axolotl/deepspeed_configs/zero2.json \
  INPUT_MODEL=llama3-8b INPUT_GPUS=8xH100 INPUT_ARGS="--seq 2048 --batch 1" run 0

# A typo in a pattern must not pass the gate by checking nothing.
INPUT_FILES="configs/nothing-*.yaml" run 2
grep -q "matches no file" "$work/stderr" || fail "no error for an empty glob"
INPUT_FILES="" run 2

# action.yml runs this script with its inputs as variables (never as shell
# text), and the pre-commit hook runs `oomplan check` on the files given.
grep -q 'run: bash "$OOMPLAN_SOURCE/.ci/action.sh"' action.yml || fail "action.yml"
grep -q 'INPUT_FILES: ${{ inputs.files }}' action.yml || fail "action.yml env"
! grep -n 'run:.*\${{' action.yml || fail "action.yml interpolates into run:"
grep -qx '  entry: oomplan check' .pre-commit-hooks.yaml || fail "hook entry"
echo "action script: ok"
