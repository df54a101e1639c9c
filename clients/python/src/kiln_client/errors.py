"""Kiln's refusals as exceptions: one class, `KilnError`, with a subclass per family of status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KilnError(Exception):
    """A refusal from Kiln (its error object), or no answer at all.

    `code` is the error object's stable code (branch on it), `status` the HTTP status (0 when
    no answer came), `message` for people, `request_id` the answer's `X-Request-Id` (the id the
    server logged the request under), `details` the error object's details (or `{}`).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int = 0,
        request_id: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" (request {request_id})" if request_id else ""))
        self.code = code
        self.message = message
        self.status = status
        self.request_id = request_id
        self.details: dict[str, Any] = dict(details or {})


class BadRequestError(KilnError):
    """400 and 422: the request itself is wrong (`invalid_request`, `unknown_model`, ...)."""


class AuthenticationError(KilnError):
    """401: no key, or a key that is unknown, expired or revoked."""


class InsufficientCreditsError(KilnError):
    """402: `insufficient_credits` or `daily_credit_cap_exceeded`."""


class PermissionDeniedError(KilnError):
    """403: the plan or the key does not allow it (scope, limits)."""


class NotFoundError(KilnError):
    """404: no such resource on this account."""


class ConflictError(KilnError):
    """409: `batch_not_cancellable`, `idempotency_key_in_use`."""


class RateLimitError(KilnError):
    """429 after the client's own retries."""


class ServerError(KilnError):
    """5xx after the client's own retries."""


class KilnConnectionError(KilnError):
    """No answer after the retries (refused connection, timeout, dropped connection)."""


class KilnTimeoutError(KilnError):
    """`batches.wait` ran past its own timeout (code `wait_timeout`); the batch goes on."""


_BY_STATUS = {
    400: BadRequestError,
    401: AuthenticationError,
    402: InsufficientCreditsError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: BadRequestError,
    429: RateLimitError,
}


def error_for_status(status: int) -> type[KilnError]:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else KilnError
