#!/usr/bin/env bash
# fuzz-smoke.sh FUZZTIME PKG:TARGET...
#
# A short coverage-guided run of each target. A run that finds a crasher
# fails at once (the input is written under the package's testdata/fuzz).
# Go's fuzzer can also end with "context deadline exceeded" when fuzztime
# runs out while it is still minimizing a new interesting input: no input
# failed, so that target is run once more, and only a second such ending
# (or any other failure) fails the smoke run.
set -uo pipefail
time=$1
shift
go=${GO:-go}
for spec in "$@"; do
  pkg=${spec%%:*}
  target=${spec##*:}
  for attempt in 1 2; do
    echo "== $pkg $target (attempt $attempt)"
    out=$("$go" test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" -fuzzminimizetime 5s "$pkg" 2>&1)
    code=$?
    printf '%s\n' "$out" | tail -n 4
    if [ $code -eq 0 ]; then
      break
    fi
    if [ $attempt -eq 1 ] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written to' <<<"$out"; then
      echo "== $target: the fuzzer's deadline passed while minimizing (no failing input); once more"
      continue
    fi
    printf '%s\n' "$out"
    exit 1
  done
done
