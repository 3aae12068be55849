#!/usr/bin/env bash
# `--format prometheus` output through `promtool check rules` (Debian's
# prometheus package): a training plan, a vLLM plan, a plan that does not
# fit, check over several files and plan-list entries, and a model folder
# whose name holds YAML and Go-template syntax, which must stay text.
# Usage: tests/test_prometheus.sh BUILT_OOMPLAN PROMTOOL  (from the repository root)
set -uo pipefail
oomplan=$1
promtool=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

rules() {  # rules NAME EXPECTED_EXIT ARGS...: oomplan ARGS > NAME.yml, checked
  local name=$1 expected=$2
  shift 2
  "$oomplan" "$@" --format prometheus >"$work/$name.yml"
  local code=$?
  [ "$code" -eq "$expected" ] || fail "$name: exit $code, expected $expected"
  "$promtool" check rules "$work/$name.yml" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "$name: promtool refused the rules"; }
}

rules train 0 llama3-8b --gpus 8xH100 --mode full --seq 2048 --zero 3
grep -q 'alert: OomplanAbovePlannedPeak' "$work/train.yml" || fail "train: no peak rule"
rules vllm 0 llama3-8b --gpus 1xH100 --engine vllm
grep -q 'alert: OomplanVllmAboveReservation' "$work/vllm.yml" || fail "vllm: no reservation rule"
rules over 1 llama3-70b --gpus 1xH100 --mode full
rules check 1 check tests/data/configs/axolotl/examples/llama-3/qlora.yml \
  tests/data/readme/plans.json --gpus 8xH100

hostile="$work/m{{ \$labels.x }}\"'#: [x]"
mkdir -p "$hostile"
# The model's name (its _name_or_path) reaches the annotations; the launch
# file's name reaches the group name and labels.
sed 's|"_name_or_path": *"[^"]*"|"_name_or_path": "q{{ $labels.x }}\\\" {{ end }}"|' \
  tests/data/hf/qwen2.5-7b/config.json >"$hostile/config.json"
grep -q 'labels.x' "$hostile/config.json" || fail "the test's config has no hostile name"
rules hostile 0 "$hostile" --gpus 1xH100
cp tests/data/configs/axolotl/examples/llama-3/qlora.yml "$work/c{{ end }}\"'.yml"
rules hostile_check 0 check "$work/c{{ end }}\"'.yml" --gpus 8xH100
grep -v '^#' "$work/hostile.yml" | grep -q '{{ \$labels.x' && fail "hostile: a template from input"
echo "prometheus rules: ok"
