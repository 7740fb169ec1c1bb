"""Reads `caal trace export --format otlp` with OpenTelemetry's own protocol
buffers (the `opentelemetry-proto` package).

Usage: python otlp_check.py FILE
Each line must parse as a `TracesData` message. OTLP/JSON differs from the
protobuf JSON mapping in one way, which this undoes before parsing: trace and
span ids are hex, not base64. Prints, last, a JSON list of the traces read:
their ids, spans (name, kind, parent, attributes, event names, status).
"""

import base64
import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import Span, TracesData

ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def hex_ids_to_base64(data):
    for resource in data.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for field in ID_FIELDS:
                    if span.get(field):
                        span[field] = base64.b64encode(bytes.fromhex(span[field])).decode()
    return data


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


traces = []
with open(sys.argv[1]) as f:
    for number, line in enumerate(f, 1):
        message = TracesData()
        # ignore_unknown_fields=False: a misspelt field is an error.
        json_format.Parse(json.dumps(hex_ids_to_base64(json.loads(line))), message)
        for resource in message.resource_spans:
            service = {a.key: value_of(a.value) for a in resource.resource.attributes}
            for scope in resource.scope_spans:
                spans = []
                for span in scope.spans:
                    assert len(span.trace_id) == 16, f"line {number}: trace id of {len(span.trace_id)} bytes"
                    assert len(span.span_id) == 8, f"line {number}: span id of {len(span.span_id)} bytes"
                    assert span.end_time_unix_nano >= span.start_time_unix_nano > 0, f"line {number}: times"
                    spans.append({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent": span.parent_span_id.hex(),
                        "name": span.name,
                        "kind": Span.SpanKind.Name(span.kind),
                        "attributes": {a.key: value_of(a.value) for a in span.attributes},
                        "events": [e.name for e in span.events],
                        "event_hashes": [
                            value_of(a.value) for e in span.events for a in e.attributes if a.key == "caal.event_hash"
                        ],
                        "status": span.status.code,
                    })
                traces.append({"service": service, "scope": scope.scope.name, "spans": spans})
print(json.dumps(traces))
