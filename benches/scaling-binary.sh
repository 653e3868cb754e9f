#!/usr/bin/env bash
# The scaling table of `cargo bench --bench process -- --scaling --sinks jsonl` for a machine
# that has a built `sqlgrade` but no cargo, no Rust toolchain and no shared/ data: a many-core
# machine borrowed for one measurement.
#
#   benches/scaling-binary.sh BINARY BASE_EVENTS [--events N] [--workers 1,2,4,…]
#                             [--stages-only] [--rounds K]
#
# BASE_EVENTS is a JSONL file of events (e.g. the first 4,398 lines of the events file that
# `cargo bench --bench process -- --keep DIR` writes: every shared BIRD and Spider prediction,
# no gold data). It is cycled to N events (default 400,000) with fresh `event_id`s, as the
# process bench does, then `BINARY run` reads them file → JSONL, deterministic judge, once per
# worker count (default 1, 2, 4, 6, 8, 12, 16 up to the machine's cores, and the cores
# themselves), K times each (default 1; the table shows the fastest run and the CPU of that run).
# `--stages-only` sets `[pipeline] max_sql_bytes = 1` (every event gets its non-scorable row
# without its SQL being read): the ceiling the stages every event crosses put on any number of
# cores. Each run's outcomes are counted: a run that did not write one STEF row or one dead letter
# per event fails the script.
#
# Prints a Markdown table — workers, events/s, × one worker, CPU (user + system) µs per event —
# headed by the machine's cores, CPU model and load. Needs bash, awk and coreutils only.
set -euo pipefail

usage() {
    sed -n '6,7p' "$0" | sed 's/^# *//' >&2
    exit 2
}

[ $# -ge 2 ] || usage
binary=$(realpath "$1")
base=$(realpath "$2")
shift 2
events=400000
workers=""
stages_only=0
rounds=1
while [ $# -gt 0 ]; do
    case "$1" in
        --events) events=${2:?}; shift 2 ;;
        --workers) workers=${2:?}; shift 2 ;;
        --stages-only) stages_only=1; shift ;;
        --rounds) rounds=${2:?}; shift 2 ;;
        *) usage ;;
    esac
done
[ -x "$binary" ] || { echo "scaling-binary: $binary is not an executable" >&2; exit 2; }
[ -s "$base" ] || { echo "scaling-binary: $base is empty or missing" >&2; exit 2; }

cores=$(nproc)
if [ -z "$workers" ]; then
    for w in 1 2 4 6 8 12 16 24 32 48 64; do
        [ "$w" -le "$cores" ] && workers="$workers $w"
    done
    case " $workers " in *" $cores "*) ;; *) workers="$workers $cores" ;; esac
else
    workers=${workers//,/ }
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/sqlgrade-scaling.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# Cycle the base events to N lines, each with its own event_id (the process bench's ev-NNNNNN);
# lines without an `"event_id": "…"` (an example file's deliberately malformed ones) are left out.
id='"event_id"[ \t]*:[ \t]*"[^"]*"'
distinct=$(awk -v id="$id" '$0 ~ id' "$base" | wc -l)
[ "$distinct" -gt 0 ] || {
    echo "scaling-binary: no line of $base has an \"event_id\": \"…\"" >&2
    exit 2
}
awk -v n="$events" -v id="$id" '
    $0 ~ id { line[m++] = $0 }
    END {
        for (i = 0; i < n; i++) {
            l = line[i % m]
            sub(id, sprintf("\"event_id\":\"ev-%06d\"", i), l)
            print l
        }
    }' "$base" >"$dir/events.jsonl"

if [ "$stages_only" = 1 ]; then
    settings="SQL left unread (\`max_sql_bytes = 1\`): the stages alone"
    unread="max_sql_bytes = 1"
else
    settings="schema-free STEF"
    unread=""
fi
model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
echo "file → jsonl, $events events ($distinct distinct), $settings, deterministic judge,"
echo "$cores cores (${model:-unknown CPU}), $("$binary" --version 2>/dev/null || echo sqlgrade);"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| workers | events/s | × one worker | sqlgrade CPU µs / event |"
echo "|---|---|---|---|"

first=""
TIMEFORMAT='%R %U %S'
for w in $workers; do
    config="$dir/run-$w.toml"
    out="$dir/out-$w"
    cat >"$config" <<EOF
[source]
kind = "file"
path = "$dir/events.jsonl"

[sink]
kind = "jsonl"
dir = "$out"

[pipeline]
workers = $w
$unread
EOF
    best=""
    for _ in $(seq 1 "$rounds"); do
        rm -rf "$out"
        if ! { time RUST_LOG=warn "$binary" run --config "$config" >/dev/null 2>"$dir/log-$w.txt"; } 2>"$dir/time-$w.txt"; then
            echo "scaling-binary: sqlgrade run failed with $w workers:" >&2
            tail -20 "$dir/log-$w.txt" >&2
            exit 1
        fi
        # Every event has its outcome: one STEF row, or a dead letter (an invalid event).
        rows=$(grep -c '"metric":"stef"' "$out/evaluations.jsonl" || true)
        letters=0
        if [ -f "$out/dead_letters.jsonl" ]; then letters=$(wc -l <"$out/dead_letters.jsonl"); fi
        if [ $((rows + letters)) -ne "$events" ]; then
            echo "scaling-binary: $rows STEF rows and $letters dead letters for $events events with $w workers" >&2
            exit 1
        fi
        read -r wall user sys <"$dir/time-$w.txt"
        if [ -z "$best" ] || awk -v a="$wall" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then
            best="$wall $user $sys"
        fi
    done
    read -r wall user sys <<<"$best"
    rate=$(awk -v n="$events" -v t="$wall" 'BEGIN { printf "%.0f", n / (t > 0.001 ? t : 0.001) }')
    [ -n "$first" ] || first=$rate
    awk -v w="$w" -v r="$rate" -v f="$first" -v u="$user" -v s="$sys" -v n="$events" \
        'BEGIN { printf "| %d | %d | %.2f | %.1f |\n", w, r, r / f, (u + s) * 1e6 / n }'
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
