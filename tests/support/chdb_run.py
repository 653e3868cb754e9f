#!/usr/bin/env python3
"""Run SQL statements on an embedded current ClickHouse engine (chDB) and report each result.

Used by tests/clickhouse_ddl_current.rs to check that the project's ClickHouse DDL
(deploy/clickhouse/) and the queries it ships run on a current ClickHouse release, while the
other integration tests use Debian's ClickHouse 18.16 server. chDB is ClickHouse built as a
library (PyPI `chdb-core-lite` / `chdb-core`); scripts/services.sh installs it in a virtualenv.

stdin:  {"statements": [{"label": "...", "sql": "...", "skip_if": "SELECT count() ..."}, ...]}
        (`skip_if`, optional: a query whose non-zero answer skips the statement, as `sqlgrade
        migrate` skips an `ADD COLUMN` whose column exists)
stdout: {"version": "26.5.1.1", "results": [{"label": ..., "ok": true, "output": "TSV"}
                                             | {"label": ..., "ok": false, "error": "..."}]}
The statements run in order in one session with its data in a fresh temporary directory (so
`USE db` carries over). Exit status 3 when chDB cannot be imported.
"""

import json
import shutil
import sys
import tempfile


def main() -> int:
    plan = json.load(sys.stdin)
    try:
        from chdb import session
    except ImportError as error:  # pragma: no cover - reported to the Rust test
        json.dump({"error": f"chdb cannot be imported: {error}"}, sys.stdout)
        return 3
    path = tempfile.mkdtemp(prefix="sqlgrade-chdb-")
    try:
        sess = session.Session(path)
        version = str(sess.query("SELECT version()", "TSV")).strip()
        results = []
        for item in plan["statements"]:
            try:
                skip_if = item.get("skip_if")
                if skip_if and str(sess.query(skip_if, "TSV")).strip() not in ("", "0"):
                    results.append({"label": item["label"], "ok": True, "output": "skipped"})
                    continue
                output = sess.query(item["sql"], "TSV")
                results.append({"label": item["label"], "ok": True, "output": str(output)})
            except Exception as error:  # chDB raises RuntimeError with the server's message
                results.append({"label": item["label"], "ok": False, "error": str(error)})
        close = getattr(sess, "close", None)
        if close is not None:
            close()
        json.dump({"version": version, "results": results}, sys.stdout)
        return 0
    finally:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
