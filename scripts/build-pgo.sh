#!/usr/bin/env bash
# Build the shipped binary with profile-guided optimisation (PGO): the container image's build
# (deploy/compose/Dockerfile) and anyone who wants the fastest binary run this instead of
# `cargo build --profile dist`. Three steps, ~2.2× the time of a plain `dist` build:
#
#   1. an instrumented build of the same profile (target/pgo/instrumented/);
#   2. a training run: `sqlgrade run` scores the repository's example events (file → JSONL, the
#      default deterministic judge) a few times, writing execution counts;
#   3. the counts merged with `llvm-profdata`, and the profile built again with them
#      (target/<profile>/sqlgrade, where `cargo build --profile <profile>` puts it).
#
# Outputs are the same as without PGO (only how the code is laid out and inlined changes;
# CHANGELOG.md, "Profile-guided optimisation", has the measurements).
#
# `llvm-profdata` must come from the same LLVM major version as rustc (`rustc -vV`): rustup's
# `llvm-tools` component (`rustup component add llvm-tools`), or the distribution's
# `llvm-<major>` package; `LLVM_PROFDATA=/path/to/llvm-profdata` overrides the search.
#
# `SQLGRADE_PGO=off` builds the profile plainly instead (`cargo build --profile PROFILE`): for an
# offline build with no llvm-profdata, or when build time matters more (the image's
# `--build-arg SQLGRADE_PGO=off`).
#
# Usage: scripts/build-pgo.sh [PROFILE]   (default: dist)
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$(pwd)
profile=${1:-dist}
work="$repo/target/pgo"

case "${SQLGRADE_PGO:-on}" in
  on) ;;
  off)
    echo "build-pgo: SQLGRADE_PGO=off, a plain build of profile $profile"
    cargo build --profile "$profile" --locked --bin sqlgrade
    echo "build-pgo: built target/$profile/sqlgrade (without PGO)"
    exit 0
    ;;
  *)
    echo "build-pgo: SQLGRADE_PGO must be on or off, not ${SQLGRADE_PGO}" >&2
    exit 1
    ;;
esac

llvm_major=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
if [ -z "$llvm_major" ]; then
  echo "build-pgo: cannot read rustc's LLVM version from \`rustc -vV\`" >&2
  exit 1
fi

# The first llvm-profdata of rustc's LLVM major version.
find_profdata() {
  local candidates=()
  [ -n "${LLVM_PROFDATA:-}" ] && candidates+=("$LLVM_PROFDATA")
  local sysroot
  sysroot=$(rustc --print sysroot)
  candidates+=("$sysroot"/lib/rustlib/*/bin/llvm-profdata)
  candidates+=("llvm-profdata-$llvm_major" "/usr/lib/llvm-$llvm_major/bin/llvm-profdata" llvm-profdata)
  local tool version
  for tool in "${candidates[@]}"; do
    command -v "$tool" > /dev/null 2>&1 || continue
    version=$("$tool" --version 2>/dev/null | sed -n 's/.*LLVM version \([0-9]*\).*/\1/p' | head -1)
    if [ "$version" = "$llvm_major" ]; then
      echo "$tool"
      return 0
    fi
  done
  return 1
}

if ! profdata=$(find_profdata); then
  echo "build-pgo: no llvm-profdata of LLVM $llvm_major (rustc's); install one with" \
    "\`rustup component add llvm-tools\` or the \`llvm-$llvm_major\` package, or set LLVM_PROFDATA" \
    "(SQLGRADE_PGO=off builds without PGO)" >&2
  exit 1
fi
echo "build-pgo: profile $profile, LLVM $llvm_major, $profdata"

rm -rf "$work/profiles" "$work/train-out"
mkdir -p "$work/profiles" "$work/train-out"

echo "build-pgo: 1/3 instrumented build"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$work/profiles" \
  cargo build --profile "$profile" --locked --bin sqlgrade --target-dir "$work/instrumented"

echo "build-pgo: 2/3 training run (examples/events.jsonl)"
cat > "$work/train.toml" <<EOF
[source]
kind = "file"
path = "$repo/examples/events.jsonl"

[sink]
kind = "jsonl"
dir = "$work/train-out"
EOF
for pass in 1 2 3 4 5; do
  rm -rf "$work/train-out"/*
  LLVM_PROFILE_FILE="$work/profiles/train-%p-%m.profraw" \
    "$work/instrumented/$profile/sqlgrade" run --config "$work/train.toml" > "$work/train.log" 2>&1 \
    || { echo "build-pgo: training pass $pass failed:" >&2; tail -20 "$work/train.log" >&2; exit 1; }
done
"$profdata" merge -o "$work/merged.profdata" "$work/profiles"

echo "build-pgo: 3/3 optimised build"
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$work/merged.profdata -Cllvm-args=-pgo-warn-missing-function=false" \
  cargo build --profile "$profile" --locked --bin sqlgrade
echo "build-pgo: built target/$profile/sqlgrade"
