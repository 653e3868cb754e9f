#!/bin/bash
# Whole-process instructions per event at line rate, counted by valgrind's callgrind (the same
# on any machine, whatever its load):
#   benches/instructions.sh [BIN] [OUT]
# BIN (default target/release/sqlgrade) backfills BIRD dev's gold SQL on the three local
# databases as events (question, evidence as the enriched question, gold SQL, db_id), 432 × 5
# and 432 × 10 of them, one worker, JSONL sink, catalogue on (BIRD's tables.json), alerts with
# their default rules (a backfill always evaluates them). Prints both totals and the difference
# divided by the 2,160 events between them: start-up and the first events' warm-up cancel out.
# OUT (default a temporary directory) keeps the callgrind files for callgrind_annotate.
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "${1:-$REPO/target/release/sqlgrade}")
OUT=$(realpath -m "${2:-$(mktemp -d)}")
D=${SQLGRADE_SHARED_DIR:-$REPO/../shared}/data/bird
mkdir -p "$OUT"
for times in 5 10; do
  python3 - "$D/dev.jsonl" "$times" > "$OUT/events_$times.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for k in range(int(sys.argv[2])):
    for r in rows:
        print(json.dumps({
            "event_id": f"{r['question_id']}-{k}", "app_id": "bench", "agent_version": "gold",
            "question": r["question"], "enriched_question": r.get("evidence") or None,
            "sql": r["gold_sql"], "db_id": r["db_id"],
        }))
EOF
  cat > "$OUT/config_$times.toml" <<EOF
[sink]
kind = "jsonl"
dir = "$OUT/rows_$times"
[stef]
catalogues = ["$D/tables.json"]
[pipeline]
workers = 1
EOF
  rm -rf "$OUT/rows_$times"
  RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind_$times.out" \
    "$BIN" backfill --input "$OUT/events_$times.jsonl" --config "$OUT/config_$times.toml" \
    > "$OUT/backfill_$times.log" 2> "$OUT/valgrind_$times.log"
  grep -h "Collected" "$OUT/valgrind_$times.log" | awk -v t=$times '{gsub(",","",$4); print t, $4}' >> "$OUT/totals"
done
awk '{n[$1]=$2} END {
  printf "432 x 5: %d instructions\n432 x 10: %d instructions\nper event: %.0f\n", n[5], n[10], (n[10]-n[5])/2160
}' "$OUT/totals"
echo "callgrind files: $OUT/callgrind_5.out $OUT/callgrind_10.out"
