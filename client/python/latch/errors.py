"""Errors of the latch HTTP/JSON API as exception classes.

Every error the API answers is ``{"code": N, "name": "NoNode", "message":
"..."}``; the client raises the class named after ``name`` (``latch.NoNode``),
a subclass of :class:`LatchError` carrying ``code``, ``name``, ``message`` and
the HTTP ``status``. The table below is the wire protocol's
(session/errors.go, codeTable): a Go test checks that it names every code
the server knows, so a code added there without a class here fails CI.
A code this client does not know yet raises :class:`LatchError` itself with
the server's name and message.
"""

__all__ = ["LatchError", "Unreachable", "error_from", "ERRORS"]


class LatchError(Exception):
    """An error answered by latch (or, for Unreachable, by nobody)."""

    code = 0
    name = "LatchError"

    def __init__(self, message="", *, code=None, name=None, status=0, body=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if name is not None:
            self.name = name
        self.status = status
        # body is the whole JSON answer (a failed multi has "results").
        self.body = body or {}

    def __str__(self):
        return self.message or self.name


class Unreachable(LatchError):
    """No member answered within the call's timeout (connection errors)."""

    name = "Unreachable"


# (code, name) of every wire error, in session/errors.go's order.
_TABLE = [
    (1, "NoNode"),
    (2, "NodeExists"),
    (3, "BadVersion"),
    (4, "NotEmpty"),
    (5, "BadPath"),
    (6, "DataTooLarge"),
    (7, "EphemeralParent"),
    (8, "NoSession"),
    (9, "TooManyOps"),
    (10, "RootImmutable"),
    (11, "BadCommand"),
    (12, "NoMember"),
    (13, "Closed"),
    (20, "NotLeader"),
    (21, "NoLeader"),
    (22, "SessionExpired"),
    (23, "UnknownSession"),
    (24, "BadSecret"),
    (25, "Version"),
    (26, "FrameTooLarge"),
    (27, "Malformed"),
    (28, "UnknownType"),
    (29, "TooManyWatches"),
    (30, "TooManySessions"),
    (31, "Timeout"),
    (32, "Canceled"),
    (33, "Busy"),
    (34, "UnknownOutcome"),
    (40, "WouldDeadlock"),
    (41, "NotHeld"),
    (42, "Locked"),
    (110, "TooManyLockRequests"),
    (111, "BadRequestID"),
    (130, "NoRoute"),
    (131, "MethodNotAllowed"),
    (132, "NoElectionLeader"),
    (140, "WrongCell"),
    (120, "PermissionDenied"),
    (121, "ReservedName"),
    (122, "BadRule"),
    (105, "NoSpace"),
    (99, "Internal"),
    (115, "AdminDenied"),
    (116, "MemberExists"),
    (117, "SnapshotTooSoon"),
    (150, "Behind"),
]

# ERRORS maps each wire name to its exception class.
ERRORS = {}
_BY_CODE = {}
for _code, _name in _TABLE:
    _cls = type(_name, (LatchError,), {"code": _code, "name": _name, "__module__": __name__,
                                       "__doc__": "The API's %s error (wire code %d)." % (_name, _code)})
    globals()[_name] = _cls
    __all__.append(_name)
    ERRORS[_name] = _cls
    _BY_CODE[_code] = _cls
del _code, _name, _cls


def error_from(status, body):
    """The exception for an error answer: status and its decoded JSON body."""
    if not isinstance(body, dict):
        body = {}
    name = body.get("name") or ""
    code = body.get("code")
    message = body.get("message") or ("HTTP %d" % status)
    cls = ERRORS.get(name) or _BY_CODE.get(code)
    if cls is None:
        return LatchError(message, code=code if isinstance(code, int) else 0,
                          name=name or "HTTP%d" % status, status=status, body=body)
    return cls(message, status=status, body=body)
