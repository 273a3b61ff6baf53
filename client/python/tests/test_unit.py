"""Tests of the client's parts that need no cluster."""

import json
import os
import unittest

import latch
from latch import errors
from latch.nodes import Op, data_fields, data_of
from latch.transport import api_path
from latch.watch import SSEParser


class ErrorTable(unittest.TestCase):
    def test_every_server_code_has_its_class(self):
        # LATCH_TEST_ERRORS is the server's own table (the Go test sets it
        # from session.Code): a code added there without a class here fails.
        raw = os.environ.get("LATCH_TEST_ERRORS")
        if not raw:
            self.skipTest("LATCH_TEST_ERRORS not set (the Go test sets it)")
        server = json.loads(raw)
        self.assertGreater(len(server), 30)
        for name, code in server.items():
            cls = latch.ERRORS.get(name)
            self.assertIsNotNone(cls, "no exception class for the API error %s (%d)" % (name, code))
            self.assertEqual(cls.code, code, name)
            self.assertIs(getattr(latch, name), cls)
            self.assertTrue(issubclass(cls, latch.LatchError))
        for name in latch.ERRORS:
            self.assertIn(name, server, "the client names an error the server does not know: %s" % name)

    def test_error_from_answer(self):
        e = errors.error_from(404, {"code": 1, "name": "NoNode", "message": "latch: no node: /x"})
        self.assertIsInstance(e, latch.NoNode)
        self.assertEqual((e.code, e.status, str(e)), (1, 404, "latch: no node: /x"))
        # By code when the name is missing; a code nobody knows stays a LatchError.
        self.assertIsInstance(errors.error_from(409, {"code": 3}), latch.BadVersion)
        e = errors.error_from(400, {"code": 999, "name": "Future", "message": "m"})
        self.assertIs(type(e), latch.LatchError)
        self.assertEqual((e.name, e.code), ("Future", 999))
        e = errors.error_from(502, "not json")
        self.assertEqual(e.name, "HTTP502")


class SSE(unittest.TestCase):
    def feed(self, text):
        p, out = SSEParser(), []
        for line in text.split("\n"):
            m = p.feed(line)
            if m is not None:
                out.append(m)
        return out

    def test_messages(self):
        got = self.feed("retry: 500\n\n: ping\n\nid: 7\nevent: ready\ndata: {\"revision\": 7}\n\n"
                        "id: 9\nevent: change\ndata: {\"a\":\ndata: 1}\n\nevent: leader\ndata:x\n\n")
        self.assertEqual(got, [("7", "ready", '{"revision": 7}'), ("9", "change", '{"a":\n1}'), (None, "leader", "x")])


class Data(unittest.TestCase):
    def test_round_trip(self):
        for b in [b"", b"plain", "h\u00e9".encode(), b"\xff\x00\xfe"]:
            self.assertEqual(data_of(data_fields(b)), b)
        self.assertIn("data_base64", data_fields(b"\xff"))
        self.assertEqual(data_fields("text"), {"data": "text"})

    def test_paths(self):
        self.assertEqual(api_path("/a/b c"), "a/b%20c")
        self.assertEqual(api_path("/"), "")
        with self.assertRaises(latch.BadPath):
            api_path("relative")

    def test_ops(self):
        self.assertEqual(Op.check("/a", 3).body, {"op": "check", "path": "/a", "version": 3})
        self.assertEqual(Op.delete("/a").body, {"op": "delete", "path": "/a"})
        self.assertEqual(Op.set("/a", b"x", version=1).body, {"op": "set", "path": "/a", "data": "x", "version": 1})


if __name__ == "__main__":
    unittest.main()
