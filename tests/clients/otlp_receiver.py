"""An OTLP/HTTP traces receiver for the live-shipping test (tests/e2e/ship.rs).

Usage: python otlp_receiver.py PORT OUT_FILE

Listens on 127.0.0.1:PORT for `POST /v1/traces` (protobuf, gzip or not),
decodes each body with OpenTelemetry's own messages (`opentelemetry-proto`:
`ExportTraceServiceRequest`), and appends the trace id of every root span to
OUT_FILE, one hex id a line, synced to disk BEFORE it answers 200: an
acknowledged round is on disk, so killing this process never loses one (it
may make the sender send a round twice, which the test counts). Prints
`{"listening": PORT}` once it accepts connections.
"""

import gzip
import json
import os
import ssl
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            return self.answer(404, b"no such path")
        if self.headers.get("Content-Type") != "application/x-protobuf":
            return self.answer(415, b"protobuf only")
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        ids = []
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    if span.parent_span_id:
                        continue
                    trace_id = span.trace_id.hex()
                    attrs = {a.key: a.value for a in span.attributes}
                    # The trace id is the round's UUID: a resend has the same one.
                    round_id = attrs["caal.round_id"].string_value.replace("-", "")
                    if round_id != trace_id or span.name != "invoke_agent caal":
                        return self.answer(400, b"a root span that is not a round")
                    ids.append(trace_id)
        with open(self.server.out, "a", encoding="utf-8") as out:
            out.write("".join(i + "\n" for i in ids))
            out.flush()
            os.fsync(out.fileno())
        self.answer(200, ExportTraceServiceResponse().SerializeToString())

    def answer(self, status, payload):
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


class Server(HTTPServer):
    # Restarted on the same port at once, while the old socket is in TIME_WAIT.
    allow_reuse_address = True


def main():
    port, out = int(sys.argv[1]), sys.argv[2]
    server = Server(("127.0.0.1", port), Receiver)
    server.out = out
    # Over TLS when given a certificate and its key (PEM files): argv 3 and 4.
    if len(sys.argv) > 4:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[3], sys.argv[4])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(json.dumps({"listening": server.server_address[1]}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
