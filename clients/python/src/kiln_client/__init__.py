"""kiln-client: Kiln's /v1 API from Python (docs/python.md)."""

__version__ = "0.1.0"

from . import webhooks
from .aio import AsyncKiln
from .client import DownloadedFile, Kiln, batch_body
from .errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InsufficientCreditsError,
    KilnConnectionError,
    KilnError,
    KilnTimeoutError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
)
from .webhooks import WebhookVerificationError

__all__ = [
    "AsyncKiln",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "DownloadedFile",
    "InsufficientCreditsError",
    "Kiln",
    "KilnConnectionError",
    "KilnError",
    "KilnTimeoutError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServerError",
    "WebhookVerificationError",
    "batch_body",
    "webhooks",
]
