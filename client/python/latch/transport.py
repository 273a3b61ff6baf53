"""HTTPS to any member of a latch cluster, with retries across members.

Any member answers any API request (a follower forwards it to the leader),
so the transport keeps one current member and moves to the next one in the
list when the current one cannot be reached or answers that it cannot serve
now. What is retried, within the call's timeout:

* a request that never reached a member (connect refused, TLS failure, a
  pooled connection the member closed, a send that failed);
* an answer that says the request was not acted on: 503 NotLeader,
  NoLeader, Closed or Behind (a stale read of a member behind the
  client), 429 Busy, 421 (misdirected);
* for reads and other requests safe to repeat (``idempotent=True``), also a
  connection that broke after the request was sent, and 503 UnknownOutcome.

A write whose connection broke after it was sent may have been applied:
it raises UnknownOutcome (as the server itself does when a forwarded write
loses its leader) and the caller decides. When the timeout passes, the last
error is raised (Unreachable when no member answered at all).
"""

import http.client
import json
import select
import ssl
import threading
import time
from urllib.parse import quote

from . import errors

# Answers that mean "not acted on, try again (elsewhere)".
_RETRY_NAMES = {"NotLeader", "NoLeader", "Closed", "Busy", "Behind"}
_RETRY_STATUSES = {421}

# An idle pooled connection older than this is not reused: the server
# closes idle keep-alive connections after two minutes.
_IDLE_MAX = 30.0


def api_path(path):
    """The URL form of a namespace path: "/a/b" -> "a/b", escaped."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise errors.ERRORS["BadPath"]("latch: path %r is not absolute" % (path,))
    return quote(path[1:], safe="/")


def ssl_context(ca=None, cert=None, key=None):
    """A TLS client context trusting ca (PEM file; None: the system's),
    presenting the client certificate cert/key when given."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert:
        ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class _NotSent(Exception):
    """The request did not leave: safe to send again."""


class Transport:
    """Sends API requests to the members at addrs ("host:port")."""

    def __init__(self, addrs, context, timeout):
        if isinstance(addrs, str):
            addrs = [a for a in addrs.split(",") if a]
        if not addrs:
            raise ValueError("latch: no member addresses")
        self.addrs = list(addrs)
        self.context = context
        self.timeout = timeout
        self._mu = threading.Lock()
        self._current = 0
        self._idle = {}  # addr -> [(conn, since)]
        self._closed = False
        # revision is the highest namespace revision any answer carried:
        # a watch starts after it, so it never shows what this client has
        # already seen (a member may lag behind the leader).
        self.revision = 0

    # Members.

    def current(self):
        with self._mu:
            return self.addrs[self._current]

    def advance(self, addr):
        """Moves off addr (if it is still the current member)."""
        with self._mu:
            if self.addrs[self._current] == addr:
                self._current = (self._current + 1) % len(self.addrs)

    # Connections.

    def _new_conn(self, addr, timeout):
        host, _, port = addr.rpartition(":")
        host = host.strip("[]")
        conn = http.client.HTTPSConnection(host, int(port), context=self.context, timeout=timeout)
        try:
            conn.connect()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise _NotSent(e)
        return conn

    def _get_conn(self, addr, timeout):
        now = time.monotonic()
        while True:
            with self._mu:
                pool = self._idle.get(addr)
                item = pool.pop() if pool else None
            if item is None:
                return self._new_conn(addr, timeout), False
            conn, since = item
            if now - since > _IDLE_MAX or _dropped(conn):
                conn.close()
                continue
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            return conn, True

    def _put_conn(self, addr, conn):
        with self._mu:
            if self._closed:
                conn.close()
                return
            self._idle.setdefault(addr, []).append((conn, time.monotonic()))

    def close(self):
        with self._mu:
            self._closed = True
            idle, self._idle = self._idle, {}
        for pool in idle.values():
            for conn, _ in pool:
                conn.close()

    # Requests.

    def _headers(self, token, extra=None):
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            h["Latch-Session"] = token
        if extra:
            h.update(extra)
        return h

    def _once(self, addr, method, url, payload, headers, timeout):
        """One attempt at addr: (status, body dict). Raises _NotSent when
        the request did not leave, OSError/HTTPException when it broke
        after."""
        conn, _ = self._get_conn(addr, timeout)
        try:
            conn.putrequest(method, url, skip_accept_encoding=True)
            for k, v in headers.items():
                conn.putheader(k, v)
            conn.putheader("Content-Length", str(len(payload)))
            conn.endheaders(payload)
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise _NotSent(e)
        try:
            resp = conn.getresponse()
            raw = resp.read()
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            self._put_conn(addr, conn)
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"message": raw[:200].decode("utf-8", "replace")}
        return resp.status, body

    def request(self, method, path, body=None, *, token=None, timeout=None, idempotent=None,
                read_timeout=None, ok_statuses=None):
        """Sends method path (an /api/v1/... URL path with query) with the
        JSON body and returns the decoded answer; raises the API's error.

        timeout bounds the whole call, retries included (default: the
        client's); read_timeout is how long one attempt may wait for its
        answer (a long poll's wait plus a margin). idempotent defaults to
        True for GET. ok_statuses lists non-2xx statuses returned as
        answers (a failed multi's body)."""
        if idempotent is None:
            idempotent = method == "GET"
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        payload = b"" if body is None else json.dumps(body).encode()
        headers = self._headers(token)
        last = None
        delay = 0.02
        while True:
            addr = self.current()
            left = deadline - time.monotonic()
            attempt = max(0.2, min(left, read_timeout or left))
            try:
                status, answer = self._once(addr, method, path, payload, headers, attempt)
            except _NotSent as e:
                last = errors.Unreachable("latch: %s %s: %s unreachable: %s" % (method, path, addr, e.args[0]))
                self.advance(addr)
            except (OSError, http.client.HTTPException) as e:
                self.advance(addr)
                if not idempotent:
                    raise errors.ERRORS["UnknownOutcome"](
                        "latch: %s %s: connection to %s lost after the request was sent: %s" % (method, path, addr, e))
                last = errors.Unreachable("latch: %s %s: %s: %s" % (method, path, addr, e))
            else:
                if 200 <= status < 300 or (ok_statuses and status in ok_statuses):
                    rev = answer.get("revision") if isinstance(answer, dict) else None
                    if isinstance(rev, int) and rev > self.revision:
                        with self._mu:
                            self.revision = max(self.revision, rev)
                    return answer
                err = errors.error_from(status, answer)
                retry = err.name in _RETRY_NAMES or status in _RETRY_STATUSES
                if err.name == "UnknownOutcome" and idempotent:
                    retry = True
                if not retry:
                    raise err
                last = err
                if err.name != "Busy":
                    self.advance(addr)
            left = deadline - time.monotonic()
            if left <= 0:
                raise last
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.25)

    def stream(self, path, *, token=None, headers=None, timeout=None, read_timeout=30.0):
        """Opens an event stream (GET path) on the current member, moving
        to the next on connection errors and retryable answers within
        timeout. Returns (conn, response); the caller reads and closes."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        h = self._headers(token, headers)
        h["Accept"] = "text/event-stream"
        last = None
        delay = 0.02
        while True:
            addr = self.current()
            conn = None
            try:
                conn = self._new_conn(addr, min(read_timeout, max(0.2, deadline - time.monotonic())))
                conn.request("GET", path, headers=h)
                resp = conn.getresponse()
                if resp.status == 200:
                    conn.sock.settimeout(read_timeout)
                    return conn, resp
                raw = resp.read()
                conn.close()
                try:
                    answer = json.loads(raw) if raw else {}
                except ValueError:
                    answer = {}
                err = errors.error_from(resp.status, answer)
                if err.name not in _RETRY_NAMES and resp.status not in _RETRY_STATUSES:
                    raise err
                last = err
            except _NotSent as e:
                last = errors.Unreachable("latch: GET %s: %s unreachable: %s" % (path, addr, e.args[0]))
            except (OSError, http.client.HTTPException) as e:
                if conn is not None:
                    conn.close()
                last = errors.Unreachable("latch: GET %s: %s: %s" % (path, addr, e))
            self.advance(addr)
            left = deadline - time.monotonic()
            if left <= 0:
                raise last
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.25)


def _dropped(conn):
    """A pooled connection the member closed (or reset) is readable while
    idle: sending on it would look like a lost answer. (TLS records that
    carry no data, such as session tickets, also make it readable: reading
    them without blocking tells the two apart.)"""
    sock = conn.sock
    if sock is None:
        return True
    try:
        r, _, _ = select.select([sock], [], [], 0)
        if not r:
            return False
        sock.setblocking(False)
        try:
            sock.recv(1)  # end of stream, or data nobody asked for
            return True
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        finally:
            sock.setblocking(True)
    except (OSError, ValueError):
        return True
