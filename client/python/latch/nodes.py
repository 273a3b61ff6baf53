"""Node data, stats and multi operations in the API's JSON form."""

import base64
from dataclasses import dataclass


def to_bytes(data):
    if data is None:
        return b""
    if isinstance(data, str):
        return data.encode("utf-8")
    return bytes(data)


def data_fields(data):
    """The JSON fields carrying data: "data" when it is UTF-8, else
    "data_base64" (the API's own rule)."""
    b = to_bytes(data)
    try:
        return {"data": b.decode("utf-8")}
    except UnicodeDecodeError:
        return {"data_base64": base64.b64encode(b).decode("ascii")}


def data_of(answer):
    """The bytes of an answer's data / data_base64 (b"" when neither)."""
    if answer.get("data_base64") is not None:
        return base64.b64decode(answer["data_base64"])
    if answer.get("data") is not None:
        return answer["data"].encode("utf-8")
    return b""


@dataclass(frozen=True)
class Stat:
    """A node's metadata. Revisions are raft indexes; version counts sets
    of the data, children_version changes of the children."""

    create_revision: int = 0
    mod_revision: int = 0
    version: int = 0
    children_version: int = 0
    ephemeral_owner: int = 0
    num_children: int = 0
    data_length: int = 0
    created_at: str = ""
    modified_at: str = ""

    @classmethod
    def of(cls, d):
        d = d or {}
        return cls(**{k: d.get(k, getattr(cls, k)) for k in cls.__dataclass_fields__})


class Op:
    """One operation of a multi: build with Op.create, Op.set, Op.delete,
    Op.check."""

    def __init__(self, body):
        self.body = body

    @classmethod
    def create(cls, path, data=b"", *, ephemeral=False, sequential=False):
        b = {"op": "create", "path": path, "ephemeral": ephemeral, "sequential": sequential}
        b.update(data_fields(data))
        return cls(b)

    @classmethod
    def set(cls, path, data, *, version=None):
        b = {"op": "set", "path": path}
        b.update(data_fields(data))
        if version is not None:
            b["version"] = version
        return cls(b)

    @classmethod
    def delete(cls, path, *, version=None):
        b = {"op": "delete", "path": path}
        if version is not None:
            b["version"] = version
        return cls(b)

    @classmethod
    def check(cls, path, version):
        return cls({"op": "check", "path": path, "version": version})

    def __repr__(self):
        return "Op(%r)" % (self.body,)


@dataclass(frozen=True)
class OpResult:
    """The result of one op: the path created (or acted on), its stat,
    and for a failed multi the error name of the op that failed."""

    path: str = ""
    stat: Stat = None
    name: str = ""
    message: str = ""
