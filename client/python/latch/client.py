"""The Client: one cluster, any member, every API call."""

from urllib.parse import urlencode

from . import errors
from .election import Election
from .lock import Lock, lock_queue_url
from .nodes import Op, OpResult, Stat, data_fields, data_of
from .session import Session
from .transport import Transport, api_path, ssl_context
from .watch import Watch


class Client:
    """A client of the latch cluster whose members' API addresses
    ("host:port", latchd --api-addr) are members.

    ca is the PEM file of the CA that signed the members' certificates;
    cert and key are this client's certificate (its identity) when the
    cluster asks for one. timeout (seconds) bounds each call, retries
    across members and leader changes included. Thread-safe: share one
    Client between threads.
    """

    def __init__(self, members, *, ca=None, cert=None, key=None, timeout=10.0, context=None):
        self.timeout = timeout
        self._t = Transport(members, context or ssl_context(ca, cert, key), timeout)

    def close(self):
        """Closes idle connections (sessions and locks are not touched)."""
        self._t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # Nodes.

    def _q(self, **params):
        params = {k: v for k, v in params.items() if v is not None and v is not False and v != ""}
        return "?" + urlencode(params) if params else ""

    def get(self, path, *, stale=False, timeout=None):
        """(data bytes, Stat) of the node at path; NoNode when missing.
        stale=True lets any member answer from its own state."""
        ans = self._t.request("GET", "/api/v1/nodes/" + api_path(path) + self._q(stale="true" if stale else None),
                              timeout=timeout)
        return data_of(ans), Stat.of(ans.get("stat"))

    def stat(self, path, *, stale=False, timeout=None):
        """The Stat of the node at path; NoNode when missing."""
        ans = self._t.request("GET", "/api/v1/stat/" + api_path(path) + self._q(stale="true" if stale else None),
                              timeout=timeout)
        return Stat.of(ans.get("stat"))

    def exists(self, path, *, stale=False, timeout=None):
        """The Stat of the node at path, or None when it does not exist."""
        try:
            return self.stat(path, stale=stale, timeout=timeout)
        except errors.ERRORS["NoNode"]:
            return None

    def create(self, path, data=b"", *, ephemeral=False, sequential=False, session=None, timeout=None):
        """Creates a node and returns its path (with the sequence number
        when sequential). An ephemeral node needs a session (Session.create
        is the short form). Raises NodeExists, NoNode (no parent), ..."""
        body = {"ephemeral": ephemeral, "sequential": sequential}
        body.update(data_fields(data))
        ans = self._t.request("POST", "/api/v1/nodes/" + api_path(path), body,
                              token=session.token if session else None, timeout=timeout)
        return ans.get("path", path)

    def set(self, path, data, *, version=None, timeout=None):
        """Sets the node's data, only if its version is version when given
        (BadVersion otherwise). Returns the new Stat."""
        body = data_fields(data)
        if version is not None:
            body["version"] = version
        ans = self._t.request("PUT", "/api/v1/nodes/" + api_path(path), body, timeout=timeout)
        return Stat.of(ans.get("stat"))

    def delete(self, path, *, version=None, timeout=None):
        """Deletes the node, only if its version is version when given."""
        self._t.request("DELETE", "/api/v1/nodes/" + api_path(path) + self._q(version=version), timeout=timeout)

    def children_page(self, path, *, after="", limit=0, stale=False, timeout=None):
        """One page of child names after `after`: (names, next_after),
        next_after None on the last page."""
        ans = self._t.request("GET", "/api/v1/children/" + api_path(path) +
                              self._q(after=after, limit=limit or None, stale="true" if stale else None),
                              timeout=timeout)
        names = ans.get("children") or []
        nxt = ans.get("next_after") if ans.get("more") else None
        return names, nxt

    def children(self, path, *, page=1000, stale=False, timeout=None):
        """All child names of path in order, read page by page."""
        out, after = [], ""
        while True:
            names, after = self.children_page(path, after=after, limit=page, stale=stale, timeout=timeout)
            out.extend(names)
            if after is None:
                return out

    def multi(self, ops, *, session=None, timeout=None):
        """Applies ops (latch.Op) all or nothing. Returns a list of OpResult;
        on failure raises the failing op's error, whose body["results"]
        say which op failed."""
        ans = self._t.request("POST", "/api/v1/multi", {"ops": [op.body for op in ops]},
                              token=session.token if session else None, timeout=timeout)
        return [OpResult(path=r.get("path", ""), stat=Stat.of(r["stat"]) if r.get("stat") else None,
                         name=r.get("name", ""), message=r.get("message", ""))
                for r in ans.get("results") or []]

    # Sessions, locks, elections.

    def session(self, ttl=10.0):
        """Opens a Session with a lease of ttl seconds (the cluster clamps
        it into its bounds), renewed by a thread until closed or lost."""
        return Session(self, ttl)

    def lock(self, path, ttl=15.0, timeout=None, *, shared=False, client_id=None):
        """A Lock on path held on an implicit lease of ttl seconds (no
        session needed): `with client.lock("/jobs/nightly", ttl=15,
        timeout=5) as lk: use(lk.fencing_token)`. For a lock that lives
        with a session, use Session.lock."""
        return Lock(self, path, ttl=ttl, timeout=timeout, shared=shared, client_id=client_id)

    def try_lock(self, path, ttl=15.0, *, shared=False, client_id=None):
        """The lock (held) if it is free now, else None."""
        return Lock(self, path, ttl=ttl, timeout=0, shared=shared, client_id=client_id).try_acquire()

    def lock_queue(self, path, *, timeout=None):
        """The lock queue on path: dicts with node, mode, session_id,
        granted, fencing_token, client_id, ... (holders first)."""
        return self._t.request("GET", lock_queue_url(path), timeout=timeout).get("queue") or []

    def election(self, path):
        """The election on path, for leader() and observe(); campaign
        through Session.election."""
        return Election(self, path)

    # Watches and the cluster.

    def watch(self, path, kind="data", *, from_revision=None, timeout=None, read_timeout=35.0):
        """A Watch: an iterator of latch.Change on path. kind is data,
        children, exists or recursive (several: "data,children"). It
        starts after the current revision, or after from_revision. close()
        it (or use `with`) to stop."""
        return Watch(self._t, path, kind, from_revision, timeout=self.timeout if timeout is None else timeout,
                     read_timeout=read_timeout)

    def members(self, *, timeout=None):
        """The cluster's members: dicts with id, api_addr, leader, voter, ..."""
        return self._t.request("GET", "/api/v1/members", timeout=timeout).get("members") or []

    def health(self, *, timeout=None):
        """The current member's health: id, leader, is_leader, ready, applied."""
        return self._t.request("GET", "/api/v1/health", timeout=timeout, ok_statuses={503})
