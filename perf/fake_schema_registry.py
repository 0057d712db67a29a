#!/usr/bin/env python3
"""A do-nothing Schema Registry stand-in for SeaweedFS's `weed mq.kafka.gateway`.

The gateway requires -schema-registry-url and, without a reachable registry, answers
CreateTopics with UNKNOWN_SERVER_ERROR. The perf runs use raw bytes (no schemas), so an
empty registry is enough: GET /subjects -> [], /config -> NONE, everything else 404.
Usage: fake_schema_registry.py PORT   (binds 127.0.0.1 only)
"""
import http.server
import json
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def _reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if path == "/subjects" or path == "/schemas/types":
            self._reply(200, [] if path == "/subjects" else ["AVRO", "JSON", "PROTOBUF"])
        elif path.startswith("/config"):
            self._reply(200, {"compatibilityLevel": "NONE"})
        else:
            self._reply(404, {"error_code": 40401, "message": "Subject not found"})

    def do_POST(self):
        self._reply(404, {"error_code": 40401, "message": "Subject not found"})

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
