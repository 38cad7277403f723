#!/usr/bin/env python3
"""A small HTTP/1.1 file server for the tests of remote objects (pipeline/io/http.hpp).

Serves the files under --root on 127.0.0.1 (port 0: the OS picks one), with single byte ranges
(`Range: bytes=a-b`, 206 + Content-Range; 416 past the end) and keep-alive, and prints
`listening on 127.0.0.1:PORT` once it accepts connections (ChildProcess::wait_listening).

Faults, injected per path and counted per request (repeatable):
  --fault PATH:KIND:COUNT[:SKIP]  after SKIP good requests (default 0), the next COUNT requests
                                 for PATH fail (COUNT -1: every one)
KINDs: 503 (an error status), reset (headers and half the body, then a TCP reset),
truncate (headers with the full Content-Length, half the body, then a clean close),
short (a 206 whose Content-Range and body cover half the range asked for).
  --require-header 'Name: value'   every request without it gets 401
  --no-ranges                      ignore Range (always 200 with the whole file)
  --tls-cert PEM --tls-key PEM     HTTPS instead of HTTP
GET /_requests lists `PATH COUNT` lines: the requests served per path (faults included).
"""
import argparse
import os
import socket
import ssl
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self, faults, required, ranges):
        self.lock = threading.Lock()
        self.faults = faults  # path -> [kind, remaining, good requests before the faults]
        self.required = required
        self.ranges = ranges
        self.requests = {}

    def take_fault(self, path):
        with self.lock:
            self.requests[path] = self.requests.get(path, 0) + 1
            fault = self.faults.get(path)
            if fault is None or fault[1] == 0:
                return None
            if fault[2] > 0:
                fault[2] -= 1
                return None
            if fault[1] > 0:
                fault[1] -= 1
            return fault[0]


def make_handler(root, state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet: the tests read stdout
            pass

        def send_plain(self, status, text):
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path == "/_requests":
                with state.lock:
                    lines = "".join(f"{p} {n}\n" for p, n in sorted(state.requests.items()))
                return self.send_plain(200, lines)
            if state.required:
                name, _, value = state.required.partition(":")
                if self.headers.get(name.strip()) != value.strip():
                    return self.send_plain(401, "unauthorized\n")
            fault = state.take_fault(path)
            file = os.path.normpath(os.path.join(root, path.lstrip("/")))
            if not file.startswith(root) or not os.path.isfile(file):
                return self.send_plain(404, "not found\n")
            if fault == "503":
                return self.send_plain(503, "try again\n")
            with open(file, "rb") as f:
                data = f.read()
            size = len(data)
            first, last, status = 0, size - 1, 200
            rng = self.headers.get("Range")
            if rng and state.ranges and rng.startswith("bytes="):
                a, _, b = rng[6:].partition("-")
                first = int(a)
                last = min(int(b), size - 1) if b else size - 1
                if first >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
            body = data[first:last + 1]
            if fault == "short" and status == 206 and len(body) > 1:
                body = body[:len(body) // 2]
                last = first + len(body) - 1
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            self.send_header("ETag", f'"{size}-{int(os.path.getmtime(file))}"')
            self.end_headers()
            if fault in ("reset", "truncate"):
                self.wfile.write(body[:len(body) // 2])
                self.wfile.flush()
                if fault == "reset":  # SO_LINGER 0: close() sends RST
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return
            self.wfile.write(body)

    return Handler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--fault", action="append", default=[])
    parser.add_argument("--require-header", default="")
    parser.add_argument("--no-ranges", action="store_true")
    parser.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM)")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM)")
    args = parser.parse_args()
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    faults = {}
    for spec in args.fault:
        parts = spec.split(":")
        skip = int(parts.pop()) if len(parts) == 4 else 0
        if len(parts) != 3:
            parser.error(f"--fault {spec}: expected PATH:KIND:COUNT[:SKIP]")
        path, kind, count = parts
        if kind not in ("503", "reset", "truncate", "short"):
            parser.error(f"unknown fault kind {kind}")
        faults[path] = [kind, int(count), skip]
    root = os.path.realpath(args.root)
    state = State(faults, args.require_header, not args.no_ranges)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(root, state))
    server.daemon_threads = True
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        # The handshake runs in the request's thread: a client that rejects the certificate
        # (or never completes it) does not hold up the accepting loop.
        server.socket = ctx.wrap_socket(server.socket, server_side=True,
                                        do_handshake_on_connect=False)
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
