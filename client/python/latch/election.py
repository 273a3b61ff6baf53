"""Leader election: an exclusive lock whose request node holds the
candidate's value; the term is the lock's fencing token."""

from . import errors
from .lock import ELECTION, Lock
from .nodes import data_fields
from .transport import api_path
from .watch import Leader, Observer


class Election:
    """The election on path. campaign, proclaim and resign need a Session
    (Session.election); leader and observe work from a Client too."""

    def __init__(self, client, path, session=None):
        self._c = client
        self.path = path
        self.session = session
        self._lock = None

    @property
    def term(self):
        """The term this candidate leads in (0 when it does not lead)."""
        return self._lock.fencing_token if self._lock is not None and self._lock.held else 0

    @property
    def lost(self):
        """Set when leadership won by campaign was lost (None before)."""
        return self._lock.lost if self._lock is not None else None

    def on_lost(self, fn):
        """Calls fn(error) once if the leadership campaign won is lost."""
        if self._lock is None:
            raise errors.ERRORS["NotHeld"]("latch: %s: not campaigned" % self.path)
        return self._lock.on_lost(fn)

    def campaign(self, value=b"", timeout=None):
        """Waits up to timeout seconds (None: no bound) to lead, with value
        as the leader's data. Returns the term; raises latch.Timeout when
        not elected in time (the candidacy is withdrawn)."""
        if self.session is None:
            raise errors.ERRORS["UnknownSession"]("latch: a campaign needs a session (Session.election)")
        lk = Lock(self._c, self.path, ttl=None, timeout=timeout, session=self.session,
                  _kind=ELECTION, _data=data_fields(value))
        lk.acquire()
        self._lock = lk
        return lk.fencing_token

    def proclaim(self, value):
        """Changes the leader's value without an election."""
        if self._lock is None or not self._lock.held:
            raise errors.ERRORS["NotHeld"]("latch: %s: not the leader" % self.path)
        body = {"term": self._lock.fencing_token}
        body.update(data_fields(value))
        self._c._t.request("POST", _election_url(self.path, "proclaim"), body,
                           token=self.session.token, idempotent=True)

    def resign(self):
        """Gives up leadership (a no-op when not leading)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def leader(self, timeout=None):
        """The current leader, or None when nobody leads."""
        try:
            ans = self._c._t.request("GET", _election_url(self.path, "leader"), timeout=timeout)
        except errors.LatchError as e:
            if e.name == "NoElectionLeader":
                return None
            raise
        return Leader.of(ans)

    def observe(self, timeout=None):
        """An iterator of Leader states: now, then at every change of
        leader, term or value (Leader.none when nobody leads). close() it
        to stop."""
        return Observer(self._c._t, self.path, timeout=self._c.timeout if timeout is None else timeout)


def _election_url(path, action):
    return "/api/v1/elections/" + (api_path(path) + "/" if path != "/" else "") + action
