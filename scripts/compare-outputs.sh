#!/bin/bash
# Every output a restructuring must keep identical, from one build of the binary:
#   scripts/compare-outputs.sh BIN OUT
# runs `run` on the embedded example, BIRD backfills of three systems and Spider backfills of
# two into JSONL directories, then `report` (with labels), `audit`, `calibrate` (text, JSON,
# --dir), `import-labels`, `score`, and the review page's overview, queues, an event page and
# its labels API over the BIRD directory. Compare two OUT directories of two builds with
#   python3 scripts/compare_outputs.py OUT_A OUT_B
# (it masks what differs from run to run: times, durations, the output directory, ports).
set -u
BIN=$(realpath "$1"); OUT=$(realpath -m "$2")
REPO=$(cd "$(dirname "$0")/.." && pwd)
D=${SQLGRADE_SHARED_DIR:-$REPO/../shared}/data
rm -rf $OUT; mkdir -p $OUT
cd "$REPO"
export RUST_LOG=warn
SQLGRADE__SINK__DIR=$OUT/example $BIN run > $OUT/example.summary 2>$OUT/example.err; echo "run rc=$?" >> $OUT/rc
for s in SuperSQL DAIL-SQL CHESS-GPT-4o-mini; do
  SQLGRADE__SINK__DIR=$OUT/bird $BIN backfill --format bird --input $D/bird/dev.jsonl --predictions $D/bird/predictions/$s.jsonl > $OUT/bird_$s.summary 2>$OUT/bird_$s.err; echo "bird $s rc=$?" >> $OUT/rc
done
for s in SuperSQL TA-ACL; do
  SQLGRADE__SINK__DIR=$OUT/spider $BIN backfill --format spider --input $D/spider/dev.jsonl --predictions $D/spider/predictions/$s.jsonl > $OUT/spider_$s.summary 2>$OUT/spider_$s.err; echo "spider $s rc=$?" >> $OUT/rc
done
python3 -c "
import json
for l in open('$D/bird/reference/ex_SuperSQL.jsonl'):
    r=json.loads(l); print(json.dumps({'question_id':r['question_id'],'label':r['ex']==1}))
" > $OUT/labels_bird.jsonl
$BIN report --run-id SuperSQL --input $OUT/bird/evaluations.jsonl --out $OUT/report_bird.html --labels $OUT/labels_bird.jsonl > $OUT/report_bird.txt 2>&1; echo "report bird rc=$?" >> $OUT/rc
$BIN report --run-id TA-ACL --input $OUT/spider/evaluations.jsonl --out $OUT/report_spider.html > $OUT/report_spider.txt 2>&1; echo "report spider rc=$?" >> $OUT/rc
$BIN audit --run-id CHESS-GPT-4o-mini --run-id DAIL-SQL --run-id SuperSQL --input $OUT/bird/evaluations.jsonl --dataset $D/bird/dev.jsonl --predictions $D/bird/predictions/SuperSQL.jsonl --predictions $D/bird/predictions/DAIL-SQL.jsonl --predictions $D/bird/predictions/CHESS-GPT-4o-mini.jsonl --jsonl $OUT/audit.jsonl --out $OUT/audit.html > $OUT/audit.txt 2>&1; echo "audit rc=$?" >> $OUT/rc
$BIN calibrate --labels $OUT/labels_bird.jsonl --rows $OUT/bird/evaluations.jsonl > $OUT/calibrate.txt 2>&1; echo "calibrate rc=$?" >> $OUT/rc
$BIN calibrate --labels $OUT/labels_bird.jsonl --rows $OUT/bird/evaluations.jsonl --json > $OUT/calibrate.json 2>&1; echo "calibrate json rc=$?" >> $OUT/rc
$BIN import-labels --labels $OUT/labels_bird.jsonl --dir $OUT/bird > $OUT/import.txt 2>&1; echo "import rc=$?" >> $OUT/rc
$BIN calibrate --dir $OUT/bird --json > $OUT/calibrate_dir.json 2>&1; echo "calibrate dir rc=$?" >> $OUT/rc
PORT=$((20000 + RANDOM % 20000))
$BIN serve --dir $OUT/bird --listen 127.0.0.1:$PORT > $OUT/serve.log 2>&1 &
SP=$!
for i in $(seq 1 100); do curl -sf http://127.0.0.1:$PORT/ >/dev/null && break; sleep 0.2; done
curl -s http://127.0.0.1:$PORT/ > $OUT/serve_overview.html
curl -s "http://127.0.0.1:$PORT/queue" > $OUT/serve_queue.html
curl -s "http://127.0.0.1:$PORT/queue?slice=calibration" > $OUT/serve_calib.html
curl -s "http://127.0.0.1:$PORT/event/227" > $OUT/serve_event1.html
curl -s "http://127.0.0.1:$PORT/api/labels" > $OUT/serve_labels.json
kill $SP; wait $SP 2>/dev/null
echo "{\"question\":\"How many heroes?\",\"sql\":\"SELECT COUNT(*) FROM superhero\"}" | $BIN score > $OUT/score.jsonl 2>&1; echo "score rc=$?" >> $OUT/rc
true
