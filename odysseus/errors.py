"""One exception hierarchy for Odysseus.

::

    OdysseusError                 base; carries an HTTP-ish ``status``
    ├── BadRequest (400)          malformed or invalid client input
    │   ├── PayloadTooLarge (413)
    │   └── InvalidParam (400)    names the request field (the OpenAI-compatible API's ``param``)
    ├── NotFound (404)            missing, or owned by somebody else
    ├── Unauthorized (401)        no valid credentials
    ├── Forbidden (403)           signed in, but not allowed (cross-site write, admin-only)
    ├── RateLimited (429)         too many failed sign-ins; carries ``retry_after``
    ├── Conflict (409)
    ├── CapacityError (503)       run engine is full
    │   └── DatabaseBusy (503)    another process holds the database's write lock
    └── ProviderError             a model provider failed (status from the failure)
        ├── ProviderUnavailable (503)   connection refused
        ├── ProviderTimeout (504)       connect / first-token / idle timeout
        ├── ProviderNetworkError (502)  other network failure, reset mid-stream
        ├── ProviderProtocolError (502) malformed chunk
        └── ProviderHTTPError (status)  the provider's own HTTP status

Below ``routes/`` code raises these; only ``routes/`` turns them into HTTP responses.
"""

from __future__ import annotations

from typing import Optional


class OdysseusError(Exception):
    """Base of every error Odysseus raises on purpose."""

    status = 500

    def __init__(self, message: str = "", *, status: Optional[int] = None, reason: Optional[str] = None):
        super().__init__(message or self.__class__.__name__)
        self.message = message or self.__class__.__name__
        if status is not None:
            self.status = status
        self.reason = reason

    def to_dict(self) -> dict:
        """The JSON body a client sees."""
        body = {"error": self.message}
        if self.reason:
            body["reason"] = self.reason
        return body


class BadRequest(OdysseusError):
    """Malformed or invalid client input."""

    status = 400


class PayloadTooLarge(BadRequest):
    """A request body over the configured limit."""

    status = 413


class InvalidParam(BadRequest):
    """Invalid client input in one named field: ``param`` (and a machine ``code``) for the /v1 API's errors."""

    def __init__(self, message: str, param: Optional[str] = None, code: Optional[str] = None):
        super().__init__(message)
        self.param = param
        self.code = code


class NotFound(OdysseusError):
    """Missing, or belonging to another owner (never confirm existence)."""

    status = 404


class Unauthorized(OdysseusError):
    """No valid credentials."""

    status = 401


class Forbidden(OdysseusError):
    """Signed in (or anonymous on a public route) but not allowed to do this."""

    status = 403


class RateLimited(OdysseusError):
    """Too many recent failures; try again after ``retry_after`` seconds."""

    status = 429

    def __init__(self, message: str = "", *, retry_after: float = 1.0):
        super().__init__(message)
        self.retry_after = retry_after


class Conflict(OdysseusError):
    """The request conflicts with current state."""

    status = 409


class CapacityError(OdysseusError):
    """The run engine has no room for another run (or is draining): answered 503 with ``Retry-After``."""

    status = 503
    retry_after = 2


class DatabaseBusy(CapacityError):
    """The database's write lock stayed taken (by another process) for longer than the caller may wait:
    answered 503 with ``Retry-After``, nothing written."""

    retry_after = 5


class ProviderError(OdysseusError):
    """A model provider failed; ``status`` is what the error event carries."""

    status = 502

    def __init__(
        self,
        message: str = "",
        *,
        status: Optional[int] = None,
        retry_after: Optional[float] = None,
        provider: Optional[str] = None,
    ):
        super().__init__(message, status=status)
        self.retry_after = retry_after
        self.provider = provider


class ProviderUnavailable(ProviderError):
    """The provider refused the connection."""

    status = 503


class ProviderTimeout(ProviderError):
    """Connect, first-token or idle timeout."""

    status = 504


class ProviderNetworkError(ProviderError):
    """Any other network failure, including a reset mid-stream."""

    status = 502


class ProviderProtocolError(ProviderError):
    """The provider sent something we cannot parse."""

    status = 502


class ProviderHTTPError(ProviderError):
    """The provider answered with an HTTP error status, passed on as is."""
