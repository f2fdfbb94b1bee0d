#!/usr/bin/env bash
# The main job on built-in samples, end to end: generate a synthetic lake and
# the real EIA lake, cook a snapshot of each, and query a series back.
# Run through `make demo` (which builds bin/ and the Python venv first).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
PY=${PY:-.venv/bin/python}
OUT=${OUT:-out/demo}

rm -rf "$OUT"
mkdir -p "$OUT"

echo "== 1. generate lakes"
"$BIN/snapbuild" gen --out "$OUT/lake-synthetic" --series 2000 --seed 1
"$BIN/snapbuild" gen --eia data/eia-prices --out "$OUT/lake-eia"

echo "== 2. build snapshots"
"$BIN/snapbuild" build --input "$OUT/lake-synthetic" --out "$OUT/snapshots/SYN"
"$BIN/snapbuild" build --input "$OUT/lake-eia" --out "$OUT/snapshots/EIA"

echo "== 3. verify (deep structure, and against the lake it came from)"
"$BIN/snapverify" --deep "$OUT/snapshots/SYN"
"$BIN/snapverify" --deep --against "$OUT/lake-eia" "$OUT/snapshots/EIA"

echo "== 4. inspect"
"$BIN/snapinspect" "$OUT/snapshots/EIA"
"$BIN/snapinspect" "$OUT/snapshots/EIA" latest --category "Natural Gas"

echo "== 5. export rows with series ids and attributes, for other tools"
"$BIN/snapbuild" export "$OUT/snapshots/EIA" "$OUT/brent.csv" --series PET.RBRTE.M --from 2026
head -3 "$OUT/brent.csv"

echo "== 6. query: read the snapshot files with pyarrow (zero-copy memory map)"
"$PY" examples/python/read_snapshot.py "$OUT/snapshots/EIA" PET.RBRTE.M --last 5
"$PY" examples/python/read_snapshot.py "$OUT/snapshots/SYN" --first-series --last 3

echo "== 7. serve over Arrow Flight and query with pyarrow.flight"
"$BIN/snapbuild" serve --root "$OUT/snapshots" --addr 127.0.0.1:0 > "$OUT/serve.json" 2> "$OUT/serve.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  [ -s "$OUT/serve.json" ] && break
  sleep 0.1
done
uri=$("$PY" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["flight"])' "$OUT/serve.json")
echo "server up at $uri: $(head -1 "$OUT/serve.json")"
"$PY" examples/python/flight_client.py --uri "$uri" list
"$PY" examples/python/flight_client.py --uri "$uri" get EIA PET.RBRTE.D --start 2020-04 --end 2020-04 --limit 5
"$PY" examples/python/flight_client.py --uri "$uri" latest EIA --prefix NG.
"$PY" examples/python/flight_client.py --uri "$uri" status
kill -TERM $server
wait $server || true
trap - EXIT

echo "demo OK: snapshots under $OUT/snapshots"
