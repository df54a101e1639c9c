"""The suite runs against a live Kiln: scripts/test-python.sh starts one and sets KILN_URL and
KILN_API_KEY (a demo account on the studio plan with 1,000 credits)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import httpx
import pytest

from kiln_client import Kiln


@pytest.fixture
def kiln() -> Iterator[Kiln]:
    if not os.environ.get("KILN_API_KEY") or not os.environ.get("KILN_URL"):
        pytest.fail("KILN_URL and KILN_API_KEY are not set: run scripts/test-python.sh")
    with Kiln() as client:
        yield client


class Recording(httpx.BaseTransport):
    """httpx's own transport, recording each request, with a hook that may replace an answer.

    `meddle(request, n)` is called before request number n (from 0); it returns an answer to
    give instead of sending, raises to lose the answer after sending (`lose_after=True`), or
    returns None to send as usual.
    """

    def __init__(self, meddle: Callable[[httpx.Request, int], object] | None = None) -> None:
        self.inner = httpx.HTTPTransport()
        self.meddle = meddle
        self.requests: list[httpx.Request] = []
        self.statuses: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        n = len(self.requests)
        self.requests.append(request)
        instead = self.meddle(request, n) if self.meddle else None
        if isinstance(instead, httpx.Response):
            self.statuses.append(instead.status_code)
            return instead
        response = self.inner.handle_request(request)
        self.statuses.append(response.status_code)
        if isinstance(instead, Exception):
            response.read()
            response.close()
            raise instead  # the server acted, the client never heard
        return response

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def recorded() -> Callable[..., tuple[Kiln, Recording]]:
    made: list[Kiln] = []

    def make(meddle: Callable[[httpx.Request, int], object] | None = None, **options: object) -> tuple[Kiln, Recording]:
        transport = Recording(meddle)
        client = Kiln(transport=transport, **options)  # type: ignore[arg-type]
        made.append(client)
        return client, transport

    yield make  # type: ignore[misc]
    for client in made:
        client.close()
