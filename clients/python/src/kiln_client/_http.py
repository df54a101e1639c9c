"""httpx with Kiln's authentication, error object, timeouts and retries."""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx

from .errors import KilnConnectionError, KilnError, error_for_status

RETRY_BASE = 0.5
RETRY_CAP = 30.0
# A Retry-After beyond this is not believed: a client should not hang for an hour.
RETRY_AFTER_CAP = 120.0


def backoff(attempt: int) -> float:
    """Exponential backoff with full jitter: 0.5 s, 1 s, 2 s ... (at most 30 s), times a random share."""
    return random.random() * min(RETRY_CAP, RETRY_BASE * 2.0**attempt)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Retry-After in seconds (given as seconds or as an HTTP date), or None."""
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), RETRY_AFTER_CAP)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, min(when.timestamp() - time.time(), RETRY_AFTER_CAP))


def api_error(response: httpx.Response) -> KilnError:
    """The answer's error object as the exception of its status's family."""
    request_id = response.headers.get("x-request-id")
    code, message, details = f"http_{response.status_code}", response.reason_phrase or "error", None
    try:
        body = json.loads(response.content or b"null")
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        code = str(error.get("code", code))
        message = str(error.get("message", message))
        details = error.get("details") if isinstance(error.get("details"), dict) else None
    cls = error_for_status(response.status_code)
    return cls(code, message, status=response.status_code, request_id=request_id, details=details)


def connection_failure(
    err: httpx.TransportError, method: str, url: str, attempt: int, retries: int, repeatable: bool
) -> float:
    """How long to wait before sending again a request that got no answer; raises when it may not be."""
    if attempt < retries and repeatable:
        return backoff(attempt)
    raise KilnConnectionError("connection_failed", f"{method} {url}: no answer ({type(err).__name__}: {err})") from err


def judge(
    response: httpx.Response, method: str, url: str, attempt: int, retries: int, repeatable: bool, accept: Sequence[int]
) -> float | None:
    """None when the answer is the caller's; else how long to wait before sending again; raises otherwise.

    429 and 503 say nothing was done: they are retried after their Retry-After (else a backoff),
    as is 409 `idempotency_key_in_use`. Other 5xx answers (like lost connections) are retried
    only when the request is `repeatable` (a read, or a write with an idempotency key), since
    the server may have acted on it. Other 4xx answers raise at once, as does a redirect (not
    followed: an answer that moved is a configuration error to see). An error answer's body
    must have been read.
    """
    status = response.status_code
    if status in accept or status < 300 or status == 304:
        return None
    if status < 400:
        location = response.headers.get("location", "?")
        raise KilnError("unexpected_redirect", f"{method} {url} answered {status} to {location}", status=status)
    error = api_error(response)
    transient = status in (429, 503) or error.code == "idempotency_key_in_use"
    if attempt < retries and (transient or (status >= 500 and repeatable)):
        wait = retry_after(response.headers)
        return wait if wait is not None else backoff(attempt)
    raise error


class _Base:
    def __init__(self, *, base_url: str, api_key: str, timeout: float, max_retries: int) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries

    def url(self, path: str) -> str:
        return self.base_url + path

    def headers(self, headers: Mapping[str, str] | None, authenticated: bool) -> dict[str, str]:
        sent = {"Accept": "application/json", **(headers or {})}
        if authenticated:  # never to result URLs: they are public, and may be on another host
            sent["Authorization"] = f"Bearer {self.api_key}"
        return sent


class Http(_Base):
    """Requests for `Kiln`: one httpx.Client, retries as `judge` says."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout: float,
        max_retries: int,
        user_agent: str,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)
        self.client = httpx.Client(
            timeout=timeout, transport=transport, follow_redirects=False, headers={"User-Agent": user_agent}
        )

    def close(self) -> None:
        self.client.close()

    @contextmanager
    def stream(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        repeatable: bool = True,
        accept: Sequence[int] = (),
        extra_timeout: float = 0.0,
        authenticated: bool = True,
        preload: bool = False,
    ) -> Iterator[httpx.Response]:
        """The answer of a request, retried as Kiln asks; its body not read yet unless `preload`."""
        sent = self.headers(headers, authenticated)
        timeout = httpx.Timeout(self.timeout + extra_timeout)
        attempt = 0
        while True:
            try:
                request = self.client.build_request(
                    method, url, json=json_body, params=params, headers=sent, timeout=timeout
                )
                response = self.client.send(request, stream=True)
                if preload or response.status_code >= 400:  # a body lost halfway is a lost answer
                    try:
                        response.read()
                    finally:
                        response.close()
            except httpx.TransportError as err:
                time.sleep(connection_failure(err, method, url, attempt, self.max_retries, repeatable))
                attempt += 1
                continue
            try:
                delay = judge(response, method, url, attempt, self.max_retries, repeatable, accept)
            except BaseException:
                response.close()
                raise
            if delay is None:
                try:
                    yield response
                finally:
                    response.close()
                return
            response.close()
            time.sleep(delay)
            attempt += 1

    def json(self, method: str, path: str, **kwargs: Any) -> tuple[Any, httpx.Headers, int]:
        """A JSON request to the API: (parsed body or None, headers, status)."""
        with self.stream(method, self.url(path), preload=True, **kwargs) as response:
            body = json.loads(response.content) if response.content else None
            return body, response.headers, response.status_code


class AsyncHttp(_Base):
    """Requests for `AsyncKiln`: the same, on one httpx.AsyncClient."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout: float,
        max_retries: int,
        user_agent: str,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)
        self.client = httpx.AsyncClient(
            timeout=timeout, transport=transport, follow_redirects=False, headers={"User-Agent": user_agent}
        )

    async def close(self) -> None:
        await self.client.aclose()

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        url: str,
        *,
        json_body: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        repeatable: bool = True,
        accept: Sequence[int] = (),
        extra_timeout: float = 0.0,
        authenticated: bool = True,
        preload: bool = False,
    ) -> AsyncIterator[httpx.Response]:
        sent = self.headers(headers, authenticated)
        timeout = httpx.Timeout(self.timeout + extra_timeout)
        attempt = 0
        while True:
            try:
                request = self.client.build_request(
                    method, url, json=json_body, params=params, headers=sent, timeout=timeout
                )
                response = await self.client.send(request, stream=True)
                if preload or response.status_code >= 400:
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
            except httpx.TransportError as err:
                await asyncio.sleep(connection_failure(err, method, url, attempt, self.max_retries, repeatable))
                attempt += 1
                continue
            try:
                delay = judge(response, method, url, attempt, self.max_retries, repeatable, accept)
            except BaseException:
                await response.aclose()
                raise
            if delay is None:
                try:
                    yield response
                finally:
                    await response.aclose()
                return
            await response.aclose()
            await asyncio.sleep(delay)
            attempt += 1

    async def json(self, method: str, path: str, **kwargs: Any) -> tuple[Any, httpx.Headers, int]:
        async with self.stream(method, self.url(path), preload=True, **kwargs) as response:
            body = json.loads(response.content) if response.content else None
            return body, response.headers, response.status_code
