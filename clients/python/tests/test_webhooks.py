"""kiln_client.webhooks.verify: the Standard Webhooks scheme, on a real delivery and by hand."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import httpx
import pytest

from kiln_client import KilnError, WebhookVerificationError, webhooks

SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
BODY = b'{"id":"evt_1","type":"ping","createdAt":1795427062562,"data":{"endpointId":"e1"}}'


def signed(body: bytes, secret: str = SECRET, msg_id: str = "evt_1", at: int | None = None) -> dict[str, str]:
    """Headers as Kiln sends them, computed here independently of the client's code."""
    stamp = int(time.time()) if at is None else at
    key = base64.b64decode(secret[len("whsec_") :])
    mac = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": "v1," + base64.b64encode(mac).decode(),
    }


def test_a_valid_delivery_verifies_and_returns_its_event() -> None:
    event = webhooks.verify(BODY, signed(BODY), SECRET)
    assert event["type"] == "ping" and event["data"] == {"endpointId": "e1"}
    assert webhooks.verify(BODY.decode(), signed(BODY), SECRET)["id"] == "evt_1"  # str bodies too
    upper = {k.upper(): v for k, v in signed(BODY).items()}
    assert webhooks.verify(BODY, upper, SECRET)["id"] == "evt_1"  # header names in any case


def test_a_tampered_delivery_is_refused() -> None:
    headers = signed(BODY)
    with pytest.raises(WebhookVerificationError) as err:
        webhooks.verify(BODY.replace(b"e1", b"e2"), headers, SECRET)
    assert err.value.code == "webhook_verification_failed" and isinstance(err.value, KilnError)
    with pytest.raises(WebhookVerificationError):
        webhooks.verify(BODY, {**headers, "webhook-id": "evt_2"}, SECRET)
    other = "whsec_" + base64.b64encode(b"x" * 32).decode()
    with pytest.raises(WebhookVerificationError):
        webhooks.verify(BODY, headers, other)
    with pytest.raises(WebhookVerificationError):
        webhooks.verify(BODY, {**headers, "webhook-signature": "v2," + headers["webhook-signature"][3:]}, SECRET)
    with pytest.raises(WebhookVerificationError):
        webhooks.verify(BODY, {k: v for k, v in headers.items() if k != "webhook-signature"}, SECRET)


def test_a_stale_or_future_delivery_is_refused() -> None:
    now = time.time()
    with pytest.raises(WebhookVerificationError, match="from now"):
        webhooks.verify(BODY, signed(BODY, at=int(now) - 301), SECRET, now=now)
    with pytest.raises(WebhookVerificationError, match="from now"):
        webhooks.verify(BODY, signed(BODY, at=int(now) + 301), SECRET, now=now)
    assert webhooks.verify(BODY, signed(BODY, at=int(now) - 299), SECRET, now=now)["id"] == "evt_1"
    with pytest.raises(WebhookVerificationError):
        webhooks.verify(BODY, {**signed(BODY), "webhook-timestamp": "soon"}, SECRET)


def test_either_signature_passes_during_a_rotation() -> None:
    old = "whsec_" + base64.b64encode(b"o" * 32).decode()
    at = int(time.time())
    both = signed(BODY, at=at)["webhook-signature"] + " " + signed(BODY, secret=old, at=at)["webhook-signature"]
    headers = {**signed(BODY, at=at), "webhook-signature": both}
    assert webhooks.verify(BODY, headers, SECRET)["id"] == "evt_1"
    assert webhooks.verify(BODY, headers, old)["id"] == "evt_1"


class _Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[bytes, dict[str, str]]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        _Receiver.received.append((body, {k: v for k, v in self.headers.items()}))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_real_delivery_from_kiln_verifies() -> None:
    """An endpoint on 127.0.0.1 (the suite's Kiln runs with WEBHOOK_ALLOW_PRIVATE) gets a ping."""
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = httpx.Client(
        base_url=os.environ["KILN_URL"], headers={"Authorization": f"Bearer {os.environ['KILN_API_KEY']}"}
    )
    try:
        made = api.post("/v1/webhooks", json={"url": f"http://127.0.0.1:{server.server_port}/hook", "events": ["ping"]})
        assert made.status_code == 201, made.text
        endpoint, secret = made.json()["endpoint"], made.json()["secret"]
        assert api.post(f"/v1/webhooks/{endpoint['id']}/test").status_code == 202
        deadline = time.monotonic() + 30
        while not _Receiver.received and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _Receiver.received, "no delivery within 30 s"
        body, headers = _Receiver.received[0]
        event = webhooks.verify(body, headers, secret)
        assert event["type"] == "ping" and event["data"]["endpointId"] == endpoint["id"]
        assert event["id"] == headers["webhook-id"]
        with pytest.raises(WebhookVerificationError):
            webhooks.verify(body + b" ", headers, secret)
        assert json.loads(body)["id"] == event["id"]
        api.delete(f"/v1/webhooks/{endpoint['id']}")
    finally:
        api.close()
        server.shutdown()
