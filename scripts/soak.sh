#!/usr/bin/env bash
# Soak test of the server (make soak; docs/OPERATIONS.md "Soak test").
# Usage: scripts/soak.sh [DURATION]   (a Go duration, default 10m)
# Runs pkg/serve's TestSoak (build tag soak) with the server in its own
# process and prints its SOAK {json} line and the test's verdict; exits
# non-zero if a request that should have succeeded failed or fds/mappings
# did not return to their baseline.
set -uo pipefail
dur="${1:-${SOAK_DURATION:-10m}}"
GO="${GO:-go}"
cd "$(dirname "$0")/.."
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
SOAK_DURATION="$dur" "$GO" test -tags soak -run '^TestSoak$' -count=1 -timeout 0 -v ./pkg/serve/ >"$log" 2>&1
rc=$?
grep -E '^(SOAK |--- |FAIL|ok|PASS)|soak_test\.go' "$log"
[ "$rc" -eq 0 ] || tail -n 40 "$log" >&2
exit "$rc"
