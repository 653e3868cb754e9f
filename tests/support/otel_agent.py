"""A text-to-SQL agent instrumented with the real OpenTelemetry SDK, for tests/otlp_source.rs.

For each of the first N BIRD dev questions it opens an agent (root) span carrying the question
as OpenInference `input.value`, an LLM span with `gen_ai.request.model`, then runs the SQL a
real system predicted (SuperSQL) on the real SQLite database inside a database client span with
the OTel DB conventions (`db.system.name`, `db.namespace`, `db.query.text`,
`db.response.returned_rows`). Every tenth query has a misspelled column, fails for real, and
its span records the exception with status ERROR. Spans go to sqlgrade's OTLP/HTTP receiver
through the SDK's BatchSpanProcessor and OTLPSpanExporter (protobuf, optionally gzip).

It also writes, beside the traces, the equivalent events in sqlgrade's own JSON contract (the
same ids, times and results, and the database span as `traceparent`), so the test can compare
the rows of both routes.

With ENDPOINT `file:PATH` the same batches are encoded as the Collector's Kafka exporter
writes them (one protobuf `ExportTraceServiceRequest` per message), one hex line per batch in
PATH, for the test to produce into Kafka.

usage: otel_agent.py ENDPOINT DATA_DIR COUNT EVENTS_OUT [gzip]
"""

import json
import math
import sqlite3
import sys
import time
from datetime import datetime, timezone

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode

endpoint, data_dir, count, events_out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
compression = Compression.Gzip if "gzip" in sys.argv[5:] else Compression.NoCompression

resource = Resource.create({"service.name": "bird-agent", "service.version": "2.3.1"})
provider = TracerProvider(resource=resource)
class HexFileExporter(SpanExporter):
    """One protobuf ExportTraceServiceRequest per batch, hex, one per line."""

    def __init__(self, path):
        self.out = open(path, "w")

    def export(self, spans):
        self.out.write(encode_spans(spans).SerializeToString().hex() + "\n")
        self.out.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self):
        self.out.close()


if endpoint.startswith("file:"):
    exporter = HexFileExporter(endpoint[len("file:"):])
else:
    exporter = OTLPSpanExporter(endpoint=endpoint, compression=compression, timeout=30)
# Small batches and a short delay: traces are split across requests, as in production.
provider.add_span_processor(
    BatchSpanProcessor(exporter, max_export_batch_size=64, schedule_delay_millis=200)
)
tracer = provider.get_tracer("fake-text-to-sql-agent")

questions = [json.loads(l) for l in open(f"{data_dir}/bird/dev.jsonl")]
predicted = {
    p["question_id"]: p["predicted_sql"]
    for p in map(json.loads, open(f"{data_dir}/bird/predictions/SuperSQL.jsonl"))
}


def rfc3339_micros(nanos):
    secs, rest = divmod(nanos, 1_000_000_000)
    t = datetime.fromtimestamp(secs, tz=timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ".%06dZ" % (rest // 1000)


events = []
for i, item in enumerate(questions[:count]):
    sql = predicted[item["question_id"]]
    if i % 10 == 0:
        sql = sql.replace("SELECT ", "SELECT no_such_column_", 1)
    db = item["db_id"]
    with tracer.start_as_current_span(
        "agent.answer", attributes={"input.value": item["question"]}
    ) as root:
        with tracer.start_as_current_span(
            "chat gpt-4o-mini",
            kind=SpanKind.CLIENT,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"},
        ):
            pass
        with tracer.start_as_current_span(
            f"SELECT {db}",
            kind=SpanKind.CLIENT,
            attributes={"db.system.name": "sqlite", "db.namespace": db, "db.query.text": sql},
        ) as span:
            error = None
            rows = None
            try:
                con = sqlite3.connect(f"file:{data_dir}/bird/databases/{db}/{db}.sqlite?mode=ro", uri=True)
                rows = len(con.execute(sql).fetchmany(10_000))
                con.close()
                span.set_attribute("db.response.returned_rows", rows)
            except sqlite3.Error as e:
                error = str(e)
                span.record_exception(e)
                span.set_status(Status(StatusCode.ERROR, error))
        db_span = span
    ctx = db_span.get_span_context()
    result = {"error": error} if error is not None else {"row_count": rows}
    nanos = db_span.end_time - db_span.start_time
    result["elapsed_ms"] = math.floor(nanos / 1000 + 0.5) / 1000
    events.append(
        {
            "event_id": "%032x-%016x" % (ctx.trace_id, ctx.span_id),
            "ts": rfc3339_micros(db_span.end_time),
            "sql": sql,
            "question": item["question"],
            "dialect": "sqlite",
            "db_id": db,
            "app_id": "bird-agent",
            "agent_version": "2.3.1",
            "model": "gpt-4o-mini",
            "result": result,
            "traceparent": "00-%032x-%016x-01" % (ctx.trace_id, ctx.span_id),
        }
    )

provider.force_flush(60_000)
provider.shutdown()
with open(events_out, "w") as f:
    for e in events:
        f.write(json.dumps(e) + "\n")
print(f"sent {len(events)} traces", file=sys.stderr)
