"""latch: a Python client of latch's HTTP/JSON API (standard library only).

    import latch

    c = latch.Client(["10.0.0.1:7423", "10.0.0.2:7423"], ca="ca.pem",
                     cert="client-app.pem", key="client-app-key.pem")
    c.create("/config", b"v1")
    data, stat = c.get("/config")
    with c.lock("/jobs/nightly", ttl=15, timeout=30) as lk:
        write_fenced(lk.fencing_token)
    for change in c.watch("/jobs", kind="recursive"):
        ...

Any member answers any call (followers forward to the leader); the client
moves to the next member on connection errors and on answers that say the
request was not acted on, within each call's timeout, so a leader change
costs time, not errors. Errors are exception classes named after the API's
error names (latch.NoNode, latch.BadVersion, ...), all latch.LatchError.
"""

from .client import Client
from .election import Election
from .errors import ERRORS, LatchError, Unreachable
from .errors import *  # noqa: F401,F403 (one class per API error name)
from .lock import Lock
from .nodes import Op, OpResult, Stat
from .session import Session
from .watch import Change, Event, Leader, Watch

__version__ = "0.1.0"
