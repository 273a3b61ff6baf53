"""The transport's rules against a scripted HTTPS member: what it sends,
what it retries, and what it refuses to retry."""

import http.server
import json
import os
import ssl
import threading
import unittest

import latch
from latch.transport import Transport, ssl_context

CERT, KEY, CA = (os.environ.get(k) for k in ("LATCH_TEST_SERVER_CERT", "LATCH_TEST_SERVER_KEY", "LATCH_TEST_CA"))


class Scripted(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next step of the server's script:
    (status, body) or "drop" (close the connection without answering)."""

    protocol_version = "HTTP/1.1"

    def handle_one(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        srv = self.server
        with srv.mu:
            srv.seen.append((self.command, self.path, dict(self.headers), body))
            step = srv.script.pop(0) if srv.script else (200, {})
        if step == "drop":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        status, answer = step
        raw = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = do_PUT = do_DELETE = handle_one

    def log_message(self, *args):
        pass


@unittest.skipUnless(CERT and KEY and CA, "LATCH_TEST_SERVER_CERT/KEY and LATCH_TEST_CA not set (the Go test sets them)")
class TransportRules(unittest.TestCase):
    def setUp(self):
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(CERT, KEY)
        self.srv.socket = ctx.wrap_socket(self.srv.socket, server_side=True)
        self.srv.mu, self.srv.seen, self.srv.script = threading.Lock(), [], []
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()
        self.addr = "127.0.0.1:%d" % self.srv.server_address[1]
        self.t = Transport([self.addr], ssl_context(CA), 5.0)

    def tearDown(self):
        self.t.close()
        self.srv.shutdown()
        self.srv.server_close()

    def script(self, *steps):
        self.srv.script[:] = list(steps)

    def test_json_content_type_and_no_origin(self):
        self.script((201, {"ok": 1}), (200, {"ok": 2}))
        self.t.request("POST", "/api/v1/nodes/a", {"data": "x"})
        self.t.request("GET", "/api/v1/nodes/a", token="7.ab")
        (m1, _, h1, b1), (m2, _, h2, b2) = self.srv.seen
        for h in (h1, h2):
            self.assertEqual(h.get("Content-Type"), "application/json")
            self.assertNotIn("Origin", h)
        self.assertEqual(json.loads(b1), {"data": "x"})
        self.assertEqual(h2.get("Latch-Session"), "7.ab")

    def test_not_acted_on_is_retried(self):
        self.script((503, {"code": 21, "name": "NoLeader", "message": "electing"}),
                    (429, {"code": 33, "name": "Busy", "message": "busy"}),
                    (421, {"code": 140, "name": "WrongCell", "message": "elsewhere"}),
                    (201, {"path": "/a"}))
        self.assertEqual(self.t.request("POST", "/api/v1/nodes/a", {}), {"path": "/a"})
        self.assertEqual(len(self.srv.seen), 4)

    def test_a_write_whose_answer_was_lost_is_not_resent(self):
        self.script("drop", (201, {"path": "/a"}))
        with self.assertRaises(latch.UnknownOutcome):
            self.t.request("POST", "/api/v1/nodes/a", {})
        self.assertEqual(len(self.srv.seen), 1)
        self.script((503, {"code": 34, "name": "UnknownOutcome", "message": "lost"}))
        with self.assertRaises(latch.UnknownOutcome):
            self.t.request("PUT", "/api/v1/nodes/a", {})

    def test_a_read_is_resent(self):
        self.script("drop", (503, {"code": 34, "name": "UnknownOutcome", "message": "lost"}), (200, {"data": "x"}))
        self.assertEqual(self.t.request("GET", "/api/v1/nodes/a"), {"data": "x"})
        self.assertEqual(len(self.srv.seen), 3)

    def test_other_errors_are_raised_at_once(self):
        self.script((404, {"code": 1, "name": "NoNode", "message": "latch: no node: /a"}))
        with self.assertRaises(latch.NoNode):
            self.t.request("GET", "/api/v1/nodes/a")
        self.assertEqual(len(self.srv.seen), 1)

    def test_moves_past_a_dead_member(self):
        t = Transport(["127.0.0.1:1", self.addr], ssl_context(CA), 5.0)
        self.addCleanup(t.close)
        self.script((200, {"ok": True}))
        self.assertEqual(t.request("POST", "/api/v1/nodes/a", {}), {"ok": True})
        self.assertEqual(t.current(), self.addr)


if __name__ == "__main__":
    unittest.main()
