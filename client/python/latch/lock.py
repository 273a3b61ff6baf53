"""Locks: exclusive or shared, fenced, renewed while held.

A Lock is held either by a Session (Session.lock: it lasts as long as the
session, or with ttl also needs renewal) or, without one (Client.lock), on
an implicit lease of its own: the API opens a lease with the lock's ttl,
and renewing the lock keeps it alive. Either way a keeper thread renews the
lock about every ttl/3 while it is held, and tells the holder when it is
lost: lost (a threading.Event) is set, error says why, and the on_lost
callbacks run once. A lock is lost when the cluster says it no longer holds
it (renewal refused, its node gone, its session ended) or when no renewal
was acknowledged within ttl of the last one (the cluster may have let it
go): stop touching what it protects. Hand fencing_token to the resource
you write to: it grows with every grant, so a resource can refuse a holder
whose lock was taken over.

Acquiring is a long poll (at most 5 minutes each; an implicit lease, which
nothing renews while it waits, polls for at most ttl/2 at a time and queues
again). If the answer to an acquire is lost (the member died while it
waited), the request may have been queued or even granted: the lock reads
the queue, adopts a grant made to it, withdraws a request still waiting,
and asks again, so a leader change costs the caller nothing but time.
"""

import os
import socket
import threading
import time
import uuid

from . import errors
from .transport import api_path

_MAX_WAIT = 300.0
# Answers that say the lock is not ours any more.
_GONE = {"NotHeld", "NoNode", "SessionExpired", "UnknownSession", "NoSession", "BadSecret"}


def lock_queue_url(path):
    """The URL of path's lock queue. Always with the /queue suffix: without
    it, a lock path whose last component is "queue" or "history" would name
    its parent's queue or history."""
    return "/api/v1/locks/" + (api_path(path) + "/" if path != "/" else "") + "queue"


def new_client_id():
    """A client id naming this process and this lock request."""
    return "%s-%d-%s" % (socket.gethostname(), os.getpid(), uuid.uuid4().hex[:12])


class _Kind:
    """The URL and field names of a lock and of an election."""

    def __init__(self, base, acquire, release, granted, token, released):
        self.base, self.acquire, self.release = base, acquire, release
        self.granted, self.token, self.released = granted, token, released


LOCK = _Kind("/api/v1/locks/", "acquire", "release", "acquired", "fencing_token", "released")
ELECTION = _Kind("/api/v1/elections/", "campaign", "resign", "leader", "term", "resigned")


class Lock:
    """A lock on path; use as a context manager (acquire on enter, release
    on exit) or call acquire()/release(). See the module doc."""

    def __init__(self, client, path, ttl=15.0, timeout=None, *, shared=False, session=None,
                 client_id=None, _kind=LOCK, _data=None):
        if session is None and not ttl:
            raise ValueError("latch: a lock without a session needs a ttl (its lease)")
        if ttl is not None and ttl < 0:
            raise ValueError("latch: ttl must not be negative")
        self._c = client
        self.path = path
        self.ttl = ttl or None
        self.timeout = timeout
        self.shared = shared
        self.session = session
        self.client_id = client_id or new_client_id()
        self._kind = _kind
        self._data = _data
        self._url = _kind.base + (api_path(path) + "/" if path != "/" else "")
        self.fencing_token = 0
        self.node = ""
        self.expires_at = ""
        self.lease_token = None  # passed back on renew/release when the API gives one
        self.lost = threading.Event()
        self.error = None
        # recoveries counts acquire answers lost on the way (a member died
        # while the request waited) that the lock recovered from.
        self.recoveries = 0
        self._mu = threading.Lock()
        self._callbacks = []
        self._held = False
        self._stop = threading.Event()
        self._thread = None

    # State.

    @property
    def held(self):
        """Acquired, not released, not lost."""
        with self._mu:
            return self._held and not self.lost.is_set()

    def check(self):
        """Raises NotHeld (or why it was lost) unless the lock is held."""
        if self.lost.is_set():
            raise self.error
        if not self.held:
            raise errors.ERRORS["NotHeld"]("latch: %s is not held" % self.path)

    def on_lost(self, fn):
        """Calls fn(error) once when the lock is lost (at once if it
        already is). Returns fn."""
        with self._mu:
            if not self.lost.is_set():
                self._callbacks.append(fn)
                return fn
        fn(self.error)
        return fn

    def _lose(self, err):
        with self._mu:
            if self.lost.is_set() or not self._held:
                return
            self.error = err
            self.lost.set()
            callbacks, self._callbacks = self._callbacks, []
        self._stop.set()
        for fn in callbacks:
            try:
                fn(err)
            except Exception:
                pass

    # Requests.

    def _body(self, **extra):
        b = {}
        if self.session is None or self._kind is LOCK:
            b["client_id"] = self.client_id
        b.update(extra)
        return b

    def _token(self):
        return self.session.token if self.session is not None else None

    def _post(self, action, body, **kw):
        return self._c._t.request("POST", self._url + action, body, token=self._token(), **kw)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()

    def try_acquire(self):
        """Takes the lock if it is free now: self, or None."""
        return self if self._acquire(0.0) else None

    def acquire(self, timeout=...):
        """Waits for the lock up to timeout seconds (None: no bound; default
        the lock's). Raises latch.Timeout when it was not granted in time;
        the request is then withdrawn. Returns self."""
        if timeout is ...:
            timeout = self.timeout
        if not self._acquire(timeout):
            raise errors.ERRORS["Timeout"]("latch: %s not granted within %ss" % (self.path, timeout))
        return self

    def _acquire(self, timeout):
        with self._mu:
            if self._held:
                raise errors.ERRORS["BadCommand"]("latch: %s is already held by this Lock" % self.path)
        if self.session is not None and self.session.lost.is_set():
            raise self.session.error
        deadline = None if timeout is None else time.monotonic() + timeout
        unknown = False  # an earlier request's fate is unknown
        while True:
            if unknown:
                state = self._recover()
                if state != "failed":
                    self.recoveries += 1
                if state == "adopted":
                    return True
                if state == "clean":
                    unknown = False
                elif deadline is not None and time.monotonic() >= deadline:
                    return False
                else:
                    time.sleep(0.1)  # no leader to ask yet
                    continue
            left = _MAX_WAIT if deadline is None else max(0.0, deadline - time.monotonic())
            wait = min(left, _MAX_WAIT)
            if self.session is None:
                wait = min(wait, max(self.ttl / 2.0, 0.5))
            body = self._body(wait_timeout_ms=int(wait * 1000))
            if self._kind is LOCK:
                body["mode"] = "shared" if self.shared else "exclusive"
            if self.ttl:
                body["ttl_ms"] = int(self.ttl * 1000)
            if self._data is not None:
                body.update(self._data)
            try:
                ans = self._post(self._kind.acquire, body, idempotent=False, read_timeout=wait + 10.0,
                                 timeout=wait + self._c.timeout)
            except errors.LatchError as e:
                if e.name == "UnknownOutcome" or (e.name == "NotHeld" and self.session is None):
                    # The answer was lost (or an implicit lease ran out
                    # while waiting): find what the request left behind.
                    unknown = True
                    continue
                if e.name == "WouldDeadlock" and self.session is not None and self._recover() == "adopted":
                    return True  # our own earlier request, granted meanwhile
                if e.name != "Unreachable":
                    raise
            else:
                if ans.get(self._kind.granted):
                    self._granted(ans)
                    return True
            if timeout == 0 or (deadline is not None and time.monotonic() >= deadline):
                return False

    def _granted(self, ans):
        self.fencing_token = ans.get(self._kind.token, 0)
        self.node = ans.get("node", "")
        self.expires_at = ans.get("expires_at", "")
        if ans.get("lease_token") is not None:
            self.lease_token = ans["lease_token"]
        with self._mu:
            self._held = True
            self.lost.clear()
            self.error = None
            self._stop.clear()
        if self.session is not None:
            self.session.on_lost(self._session_lost)
        self._thread = threading.Thread(target=self._keep, name="latch-lock-%s" % self.path, daemon=True)
        self._thread.start()

    def _session_lost(self, err):
        self._lose(err)

    def _mine(self, queue):
        for q in queue:
            if self.session is not None:
                if q.get("session_id") == self.session.id and (self._kind is ELECTION or q.get("client_id") == self.client_id):
                    yield q
            elif q.get("client_id") == self.client_id:
                yield q

    def _recover(self):
        """After a lost acquire answer: adopts a grant made to this lock and
        withdraws its requests still waiting. Returns "adopted", "clean"
        (nothing of it is left), or "failed" (the queue could not be read
        or a request not withdrawn yet: try again)."""
        try:
            ans = self._c._t.request("GET", lock_queue_url(self.path), token=self._token())
        except errors.LatchError:
            return "failed"
        state = "clean"
        for q in self._mine(ans.get("queue") or []):
            if not q.get("node"):
                continue  # a lock-delay placeholder: nobody's request
            if q.get("granted") and state != "adopted":
                self._granted({self._kind.token: q.get("fencing_token", 0), "node": q.get("node", ""),
                               "expires_at": q.get("expires_at", "")})
                state = "adopted"
                continue
            try:
                self._post(self._kind.release, self._body(node=q.get("node", "")), idempotent=True)
            except errors.LatchError as e:
                # An implicit lease this client cannot name (the API wants a
                # lease token it never received) expires with its ttl.
                if self.session is not None and e.name not in _GONE and state != "adopted":
                    state = "failed"
        return state

    def _renew_body(self):
        b = self._body(fencing_token=self.fencing_token)
        if self.ttl:
            b["ttl_ms"] = int(self.ttl * 1000)
        if self.lease_token is not None:
            b["lease_token"] = self.lease_token
        return b

    def _keep(self):
        """Renews (or, for a session lock without ttl, checks) the lock
        until it is released or lost."""
        period = (self.ttl or self.session.ttl) / 3.0
        last_ok = time.monotonic()
        wait = period
        why = None
        while not self._stop.wait(wait):
            sent = time.monotonic()
            left = (self.ttl or self.session.ttl) - (sent - last_ok)
            if self.ttl and left <= 0:
                self._lose(errors.ERRORS["NotHeld"](
                    "latch: %s: no renewal acknowledged within its ttl (last error: %s); it may have been taken over"
                    % (self.path, why)))
                return
            try:
                if self.ttl and self._kind is LOCK:
                    self._post("renew", self._renew_body(), idempotent=True, timeout=max(left, 0.1))
                else:
                    # Held as long as the session: check that its node is there.
                    self._c._t.request("GET", "/api/v1/stat/" + api_path(self.node), token=self._token(),
                                       timeout=max(left, 0.1))
            except errors.LatchError as e:
                if e.name in _GONE:
                    self._lose(e)
                    return
                why = e
                wait = 0.05
                continue
            last_ok = sent
            wait = period

    def release(self):
        """Releases the lock (a no-op when it was lost or never held)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._mu:
            held, self._held = self._held and not self.lost.is_set(), False
        if not held:
            return
        body = self._body(**{self._kind.token: self.fencing_token})
        if self.lease_token is not None:
            body["lease_token"] = self.lease_token
        try:
            self._post(self._kind.release, body, idempotent=True)
        except errors.LatchError as e:
            if e.name not in _GONE:
                raise
