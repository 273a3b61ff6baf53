"""Sessions: a lease the client keeps alive, owning ephemerals and locks."""

import threading
import time

from . import errors

# Answers that say the session is gone for good.
_GONE = {"SessionExpired", "UnknownSession", "BadSecret", "NoSession"}


class Session:
    """A session opened on the cluster (Client.session()).

    A keepalive thread renews it about every ttl/3. It is lost when the
    cluster says it is gone, or when no renewal was acknowledged within ttl
    of the last one that was (the cluster may then expire it at any time):
    lost (a threading.Event) is set, error says why, and every callback
    given to on_lost runs once, on the keepalive thread. Ephemeral nodes,
    locks and elections made through the session are its own; locks held
    through it report lost with it. close() ends it on the cluster now.
    """

    def __init__(self, client, ttl=10.0):
        if ttl <= 0:
            raise ValueError("latch: session ttl must be positive")
        self._c = client
        ans = client._t.request("POST", "/api/v1/sessions", {"ttl_ms": int(ttl * 1000)}, idempotent=True)
        self.id = ans["session_id"]
        self.token = ans["token"]
        self.ttl = ans.get("ttl_ms", int(ttl * 1000)) / 1000.0
        self.lost = threading.Event()
        self.error = None
        self._mu = threading.Lock()
        self._callbacks = []
        self._stop = threading.Event()
        self._lease_end = time.monotonic() + self.ttl
        self._thread = threading.Thread(target=self._keepalive, name="latch-session-%d" % self.id, daemon=True)
        self._thread.start()

    def on_lost(self, fn):
        """Calls fn(error) once when the session is lost (at once if it
        already is). Returns fn, so it can decorate."""
        with self._mu:
            if not self.lost.is_set():
                self._callbacks.append(fn)
                return fn
        fn(self.error)
        return fn

    def _lose(self, err):
        with self._mu:
            if self.lost.is_set():
                return
            self.error = err
            self.lost.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn(err)
            except Exception:  # a callback's failure must not stop the others
                pass

    def _keepalive(self):
        interval = self.ttl / 3.0
        wait = interval
        while not self._stop.wait(wait):
            sent = time.monotonic()
            left = self._lease_end - sent
            if left <= 0:
                self._lose(errors.ERRORS["SessionExpired"](
                    "latch: session %d: no renewal acknowledged within its ttl" % self.id))
                return
            try:
                ans = self._c._t.request("POST", "/api/v1/sessions/%d/keepalive" % self.id, token=self.token,
                                         idempotent=True, timeout=min(left, interval))
            except errors.LatchError as e:
                if e.name in _GONE:
                    self._lose(e)
                    return
                wait = min(0.1, max(0.0, self._lease_end - time.monotonic()))
                continue
            ttl = ans.get("ttl_ms")
            if ttl:
                self.ttl = ttl / 1000.0
                interval = self.ttl / 3.0
            self._lease_end = sent + self.ttl
            wait = interval

    def close(self):
        """Ends the session: its ephemerals and locks go. Locks held
        through it report lost; on_lost callbacks do not run for a close."""
        self._stop.set()
        with self._mu:
            already = self.lost.is_set()
            self._callbacks = []
            if not already:
                self.error = errors.ERRORS["SessionExpired"]("latch: session %d closed" % self.id)
                self.lost.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        if not already:
            try:
                self._c._t.request("DELETE", "/api/v1/sessions/%d" % self.id, token=self.token, idempotent=True)
            except errors.LatchError as e:
                if e.name not in _GONE:
                    raise

    def orphan(self):
        """Stops renewing without closing: the cluster expires the session
        after its ttl (as if this process had died)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # What the session owns.

    def create(self, path, data=b"", *, ephemeral=True, sequential=False, timeout=None):
        """Creates a node owned by this session (ephemeral by default)."""
        return self._c.create(path, data, ephemeral=ephemeral, sequential=sequential, session=self, timeout=timeout)

    def multi(self, ops, *, timeout=None):
        """A multi whose ephemeral creates this session owns."""
        return self._c.multi(ops, session=self, timeout=timeout)

    def lock(self, path, ttl=None, timeout=None, *, shared=False):
        """A lock held by this session (see latch.Lock): without ttl it
        lasts as long as the session; with ttl it also needs renewal
        (done while held)."""
        from .lock import Lock
        return Lock(self._c, path, ttl=ttl, timeout=timeout, shared=shared, session=self)

    def try_lock(self, path, ttl=None, *, shared=False):
        """The lock if it is free now, else None."""
        from .lock import Lock
        return Lock(self._c, path, ttl=ttl, timeout=0, shared=shared, session=self).try_acquire()

    def election(self, path):
        """The election on path, campaigning as this session."""
        from .election import Election
        return Election(self._c, path, self)
