"""Weft's status codes as Python exceptions carrying Weft's message."""

import enum

from ._lib import lib


class Status(enum.IntEnum):
    SUCCESS = 0
    INPROGRESS = 1
    INVALID_ARG = -1
    NO_MEMORY = -2
    SYSTEM = -3
    REMOTE = -4
    TIMEOUT = -5
    NOT_SUPPORTED = -6
    INTERNAL = -7
    ABORTED = -8
    REVOKED = -9


class WeftError(RuntimeError):
    """A Weft call failed. ``status`` is the Status code, ``message`` the
    sentence Weft recorded (which rank, peer and call failed)."""

    def __init__(self, status, message, call=None):
        self.status = Status(status) if status in Status._value2member_map_ else status
        self.message = message
        self.call = call
        name = lib.weft_status_string(status).decode()
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{name}: {message}" if message else f"{where}{name}")


class WeftTimeoutError(WeftError, TimeoutError):
    """A bounded wait ran out (WEFT_TIMEOUT, or the communicator's timeout)."""


class WeftRemoteError(WeftError, ConnectionError):
    """A peer failed, closed its connection or sent data that does not match."""


class WeftRevokedError(WeftError):
    """The communicator was revoked (Comm.revoke, here or on another rank):
    Comm.shrink() makes one of the survivors. From Comm.shrink() itself: this
    rank was left out, and the job goes on without it."""


def error_for(status, message, call=None):
    cls = {Status.TIMEOUT: WeftTimeoutError, Status.REMOTE: WeftRemoteError,
           Status.REVOKED: WeftRevokedError}.get(status, WeftError)
    return cls(status, message, call)


def init_message():
    msg = lib.weft_init_last_error()
    return msg.decode(errors="replace") if msg else ""


def comm_message(handle):
    msg = lib.weft_comm_last_error(handle)
    return msg.decode(errors="replace") if msg else ""


def check_init(status, call):
    """Raise for a failed call that has no communicator to hold its message."""
    if status != Status.SUCCESS:
        raise error_for(status, init_message(), call)
