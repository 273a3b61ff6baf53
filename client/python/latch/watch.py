"""Watches over Server-Sent Events, resumed across dropped connections.

A watch opens GET /api/v1/watch/{path} on some member and reads its event
stream. Every message carries its revision as the SSE id; when the
connection drops (the member died, was restarted, or the stream ended after
a resync) the watch opens it again on the next member with Last-Event-ID:
the last revision it delivered, so it misses nothing and delivers nothing
twice. When the history it asks for is gone (or it fell too far behind) the
server says resync: the watch yields a Change with resync=True, and the
caller re-reads what it shows.

A member that sends nothing for read_timeout (it pings every 15 s) counts
as gone.
"""

import http.client
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

from . import errors
from .nodes import data_of
from .transport import api_path

_KINDS = {"data", "children", "exists", "recursive"}


@dataclass(frozen=True)
class Event:
    """One event of a revision: type is created, deleted, data-changed,
    children-changed, ... as the server names it."""

    type: str
    path: str
    session_id: int = 0


@dataclass(frozen=True)
class Change:
    """What one revision did, or (resync=True) a notice that events were
    lost: re-read the state the watch covers."""

    revision: int
    events: list = field(default_factory=list)
    resync: bool = False


@dataclass(frozen=True)
class Leader:
    """An election's leader as observe and leader() report it: none means
    nobody leads; term is the leader's fencing token."""

    path: str
    none: bool = False
    term: int = 0
    node: str = ""
    session_id: int = 0
    data: bytes = b""
    revision: int = 0

    @classmethod
    def of(cls, d):
        return cls(path=d.get("path", ""), none=bool(d.get("none")), term=d.get("term", 0),
                   node=d.get("node", ""), session_id=d.get("session_id", 0), data=data_of(d),
                   revision=d.get("revision", 0))


class SSEParser:
    """Turns event-stream lines into (id, event, data) messages."""

    def __init__(self):
        self._reset()

    def _reset(self):
        self.id, self.event, self.data = None, "message", []

    def feed(self, line):
        """Feeds one line (str, without its newline); returns a message
        (id, event, data) when the line ends one, else None. id is None
        when the message carried none."""
        if line == "":
            if not self.data and self.event == "message" and self.id is None:
                return None
            msg = (self.id, self.event, "\n".join(self.data))
            self._reset()
            return msg
        if line.startswith(":"):
            return None  # comment (ping)
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "id":
            self.id = value
        elif name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        return None


class _Closed(Exception):
    """The stream was closed while it was being opened."""


class _Stream:
    """Common reconnecting event-stream reader."""

    def __init__(self, transport, url, token, timeout, read_timeout):
        self._t = transport
        self._url = url
        self._token = token
        self._timeout = timeout
        self._read_timeout = read_timeout
        self._mu = threading.Lock()
        self._conn = None
        self._resp = None
        self._closed = False

    def _open(self, headers):
        conn, resp = self._t.stream(self._url, token=self._token, headers=headers,
                                    timeout=self._timeout, read_timeout=self._read_timeout)
        with self._mu:
            if self._closed:
                conn.close()
                raise _Closed()
            self._conn, self._resp = conn, resp

    def _drop(self):
        with self._mu:
            conn, self._conn, self._resp = self._conn, None, None
        if conn is not None:
            _shut(conn)

    def _messages(self):
        """Reads messages from the open stream until it ends or breaks."""
        parser = SSEParser()
        resp = self._resp
        while True:
            try:
                raw = resp.readline(1 << 20)
            except (OSError, ValueError, http.client.HTTPException, AttributeError):
                return
            if not raw:
                return
            msg = parser.feed(raw.decode("utf-8", "replace").rstrip("\r\n"))
            if msg is not None:
                yield msg

    def close(self):
        """Ends the watch; an iteration blocked on it returns."""
        with self._mu:
            self._closed = True
            conn, self._conn, self._resp = self._conn, None, None
        if conn is not None:
            _shut(conn)

    @property
    def closed(self):
        with self._mu:
            return self._closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Watch(_Stream):
    """An iterator of Change messages on a path; see the module doc.

    Construction opens the stream and waits for the server's ready, so a
    change made after it returns is seen. Without from_revision the watch
    starts after the later of the member's revision and the highest this
    client has seen in any answer: a member lagging behind the leader
    does not replay what the client already read or wrote. revision is the
    revision the watch started after (or the last it delivered)."""

    def __init__(self, transport, path, kind="data", from_revision=None, token=None,
                 timeout=10.0, read_timeout=35.0):
        kinds = [k.strip() for k in kind.split(",")] if isinstance(kind, str) else list(kind)
        for k in kinds:
            if k not in _KINDS:
                raise errors.ERRORS["BadCommand"]("latch: watch kind %r is not one of %s" % (k, sorted(_KINDS)))
        url = "/api/v1/watch/" + api_path(path) + "?" + urlencode({"kind": ",".join(kinds)})
        super().__init__(transport, url, token, timeout, read_timeout)
        self.path = path
        self.revision = from_revision
        self.reconnects = 0
        self._gen = None
        self._connect()

    def _connect(self):
        headers = {}
        if self.revision is not None:
            headers["Last-Event-ID"] = str(self.revision)
        self._open(headers)
        for sid, event, data in self._messages():
            if event == "ready":
                if self.revision is None:
                    self.revision = max(int(sid or json.loads(data).get("revision", 0)), self._t.revision)
                return
        self._drop()
        raise errors.Unreachable("latch: watch %s: the stream ended before it was ready" % self.path)

    def __iter__(self):
        return self

    def __next__(self):
        if self._gen is None:
            self._gen = self._run()
        return next(self._gen)

    def _run(self):
        while not self.closed:
            for sid, event, data in self._messages():
                if event not in ("change", "resync"):
                    continue
                body = json.loads(data) if data else {}
                rev = int(sid) if sid else int(body.get("revision", 0))
                if event == "change" and self.revision is not None and rev <= self.revision:
                    continue  # seen before a reconnect
                self.revision = rev
                if event == "resync":
                    yield Change(rev, [], True)
                else:
                    yield Change(rev, [Event(e.get("type", ""), e.get("path", ""), e.get("session_id", 0))
                                       for e in body.get("events") or []])
                if self.closed:
                    return
            self._drop()
            if self.closed:
                return
            self._reconnect()

    def _reconnect(self):
        """Opens the stream again after the last revision delivered, on
        the next member; gives up (raising) only after timeout with no
        member answering."""
        self._t.advance(self._t.current())
        self.reconnects += 1
        try:
            self._connect()
        except _Closed:
            return


class Observer(_Stream):
    """An iterator of Leader states of an election: the current one first,
    then one at every change of leader, term or value. Reconnects like a
    watch, and never repeats the state it yielded last."""

    def __init__(self, transport, path, token=None, timeout=10.0, read_timeout=35.0):
        super().__init__(transport, "/api/v1/elections/" + (api_path(path) + "/" if path != "/" else "") + "observe", token, timeout, read_timeout)
        self.path = path
        self.reconnects = 0
        self._last = None
        self._gen = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._gen is None:
            self._gen = self._run()
        return next(self._gen)

    def _run(self):
        first = True
        while not self.closed:
            try:
                self._open({})
            except _Closed:
                return
            if not first:
                self.reconnects += 1
            first = False
            for _, event, data in self._messages():
                if event != "leader":
                    continue
                ld = Leader.of(json.loads(data))
                key = (ld.none, ld.term, ld.data)
                if key == self._last:
                    continue
                self._last = key
                yield ld
                if self.closed:
                    return
            self._drop()
            self._t.advance(self._t.current())
            time.sleep(0.02)


def _shut(conn):
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    conn.close()
