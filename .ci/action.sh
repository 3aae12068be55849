#!/usr/bin/env bash
# The step of action.yml: find or build oomplan, then
#   oomplan check FILES... --summary [--gpus G] [--model M] [ARGS...]
# with the job summary written to $GITHUB_STEP_SUMMARY. Exit code: oomplan's
# (0 every plan fits, 1 one does not, 2 bad input); it is also written to
# $GITHUB_OUTPUT as exit-code. Inputs come as INPUT_FILES, INPUT_GPUS,
# INPUT_MODEL and INPUT_ARGS. OOMPLAN_BIN names a built binary (CI uses the
# one it just built); else `oomplan` on PATH; else this repository is built
# into $RUNNER_TEMP/oomplan-build (Debian/Ubuntu packages via apt-get).
set -euo pipefail
source_dir=${OOMPLAN_SOURCE:-$(cd "$(dirname "$0")/.." && pwd)}

find_binary() {
  if [ -n "${OOMPLAN_BIN:-}" ]; then
    echo "$OOMPLAN_BIN"
  elif command -v oomplan >/dev/null 2>&1; then
    command -v oomplan
  else
    local build="${RUNNER_TEMP:-/tmp}/oomplan-build"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    echo "oomplan: building from $source_dir" >&2
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
      --no-install-recommends cmake make g++ libcli11-dev nlohmann-json3-dev \
      libfmt-dev libyaml-cpp-dev >&2
    cmake -S "$source_dir" -B "$build" -DCMAKE_BUILD_TYPE=Release \
      -DOOMPLAN_TESTS=OFF >&2
    cmake --build "$build" -j"$(nproc)" --target oomplan >&2
    echo "$build/oomplan"
  fi
}

# Each word of INPUT_FILES is a path or a glob; one that matches nothing is
# an error (a typo must not pass the gate by checking nothing).
shopt -s globstar nullglob
files=()
read -r -d '' -a patterns <<<"${INPUT_FILES:-}" || true
for pattern in "${patterns[@]}"; do
  matched=($pattern)
  if [ "${#matched[@]}" -eq 0 ]; then
    echo "oomplan: error: files: '$pattern' matches no file" >&2
    exit 2
  fi
  files+=("${matched[@]}")
done
shopt -u globstar nullglob
if [ "${#files[@]}" -eq 0 ]; then
  echo "oomplan: error: files: give the launch files to check" >&2
  exit 2
fi

args=(check "${files[@]}" --summary)
[ -n "${INPUT_GPUS:-}" ] && args+=(--gpus "$INPUT_GPUS")
[ -n "${INPUT_MODEL:-}" ] && args+=(--model "$INPUT_MODEL")
read -r -a extra <<<"${INPUT_ARGS:-}" || true
args+=("${extra[@]}")

binary=$(find_binary)
code=0
"$binary" "${args[@]}" || code=$?
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  echo "exit-code=$code" >>"$GITHUB_OUTPUT"
fi
exit "$code"
