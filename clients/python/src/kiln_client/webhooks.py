"""Verifying Kiln's webhook deliveries (the Standard Webhooks scheme, docs/webhooks.md).

The signature is HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<raw body>`, keyed with the
base64-decoded part of the secret after `whsec_`, sent as `v1,<base64>`; during a rotation the
header holds two signatures separated by a space, and either may match.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import cast

from .errors import KilnError
from .types import WebhookEvent

DEFAULT_TOLERANCE = 300  # seconds either side of now, as the scheme's libraries allow


class WebhookVerificationError(KilnError):
    """A delivery that is not Kiln's, was altered, or is too old (code `webhook_verification_failed`)."""

    def __init__(self, message: str) -> None:
        super().__init__("webhook_verification_failed", message)


def _header(headers: Mapping[str, str], name: str) -> str:
    # Frameworks hand headers over in any case (httpx, Starlette and Django's META differ).
    for key, value in headers.items():
        if key.lower() == name:
            return value
    raise WebhookVerificationError(f"missing header {name}")


def sign(payload: bytes | str, msg_id: str, timestamp: int, secret: str) -> str:
    """The `webhook-signature` value Kiln sends for this body, id and timestamp (for tests)."""
    body = payload.encode() if isinstance(payload, str) else payload
    mac = hmac.new(_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def _key(secret: str) -> bytes:
    try:
        return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except (binascii.Error, ValueError) as err:
        raise ValueError("a webhook secret is whsec_ and base64") from err


def verify(
    payload: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> WebhookEvent:
    """Checks a delivery and returns its event; raises `WebhookVerificationError` otherwise.

    Pass the body exactly as received (bytes, or the str it decodes to): JSON parsed and
    serialised again would not match. `headers` is any mapping of the request's headers.
    """
    msg_id = _header(headers, "webhook-id")
    stamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not a number") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookVerificationError(f"webhook-timestamp is more than {tolerance} s from now")
    expected = sign(payload, msg_id, timestamp, secret).encode()
    # Every candidate is compared, in constant time, so timing says nothing about which failed.
    matched = False
    for candidate in signatures.split(" "):
        if candidate.startswith("v1,") and hmac.compare_digest(candidate.encode(), expected):
            matched = True
    if not matched:
        raise WebhookVerificationError("no signature matches")
    body = payload.decode() if isinstance(payload, bytes) else payload
    try:
        return cast(WebhookEvent, json.loads(body))
    except ValueError:
        raise WebhookVerificationError("the body is not JSON") from None
