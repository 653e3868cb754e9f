#!/usr/bin/env bash
# The project's one test command (README "Run the tests"; .ci/run calls exactly this).
#
# Runs every test target (unit, integration, CLI end-to-end, hostile inputs, benches compiled in
# test mode) and the doc tests. Tests find the benchmark data through
# sqlgrade::testdata::shared_dir(): $SQLGRADE_SHARED_DIR, else ../shared beside the repository,
# else /work/shared.
#
# Later stages of this script will also install and start the real servers the integration
# tests use (ClickHouse from Debian, the tansu Kafka broker); today nothing needs a server.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --all-targets
cargo test --doc
