"""`AsyncKiln`: the same client for asyncio, on httpx.AsyncClient (docs/python.md)."""

from __future__ import annotations

import asyncio
import builtins
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, cast

import httpx

from . import __version__
from ._http import AsyncHttp
from .client import (
    DEFAULT_BASE_URL,
    LONG_POLL_SECONDS,
    DownloadedFile,
    _attachment_name,
    _file_name,
    _segment,
    batch_body,
)
from .errors import KilnConnectionError, KilnTimeoutError
from .types import Account, Batch, BatchCreated, BatchWithTasks, Estimate, ModelCatalog

Progress = Callable[[BatchWithTasks], "Awaitable[None] | None"]


class AsyncKiln:
    """`Kiln`'s twin for asyncio: the same arguments, the same methods, awaited."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("KILN_API_KEY")
        if not key:
            raise ValueError("no API key: pass api_key= or set KILN_API_KEY")
        self._http = AsyncHttp(
            base_url=base_url or os.environ.get("KILN_URL") or DEFAULT_BASE_URL,
            api_key=key,
            timeout=timeout,
            max_retries=max_retries,
            user_agent=f"kiln-client-python/{__version__}",
            transport=transport,
        )
        self.models = AsyncModels(self._http)
        self.batches = AsyncBatches(self._http)

    async def me(self) -> Account:
        body, _, _ = await self._http.json("GET", "/v1/me")
        return cast(Account, body)

    async def close(self) -> None:
        await self._http.close()

    async def __aenter__(self) -> AsyncKiln:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncModels:
    def __init__(self, http: AsyncHttp) -> None:
        self._http = http

    async def list(self) -> ModelCatalog:
        body, _, _ = await self._http.json("GET", "/v1/models")
        return cast(ModelCatalog, body)


class AsyncBatches:
    def __init__(self, http: AsyncHttp) -> None:
        self._http = http

    async def estimate(self, model: str, prompts: Sequence[str], **options: Any) -> Estimate:
        body, _, _ = await self._http.json(
            "POST", "/v1/batches/estimate", json_body=batch_body(model, prompts, **options)
        )
        return cast(Estimate, body)

    async def create(
        self, model: str, prompts: Sequence[str], *, idempotency_key: str | None = None, **options: Any
    ) -> BatchCreated:
        key = idempotency_key or str(uuid.uuid4())  # the same on every retry of this call
        body, headers, _ = await self._http.json(
            "POST", "/v1/batches", json_body=batch_body(model, prompts, **options), headers={"Idempotency-Key": key}
        )
        created = dict(body)
        created["idempotencyKey"] = key
        created["replayed"] = headers.get("idempotent-replayed") == "true"
        return cast(BatchCreated, created)

    async def get(self, batch_id: str) -> BatchWithTasks:
        body, _, _ = await self._http.json("GET", f"/v1/batches/{_segment(batch_id)}")
        return cast(BatchWithTasks, body)

    async def list(self, page_size: int | None = None) -> AsyncIterator[Batch]:
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {}
            if page_size is not None:
                params["limit"] = page_size
            if cursor:
                params["cursor"] = cursor
            body, _, _ = await self._http.json("GET", "/v1/batches", params=params)
            for batch in body["batches"]:
                yield batch
            cursor = body.get("nextCursor")
            if not cursor:
                return

    async def wait(
        self, batch_id: str, timeout: float | None = None, on_progress: Progress | None = None
    ) -> BatchWithTasks:
        """As `Kiln.batches.wait`; `on_progress` may be a plain function or a coroutine function."""
        path = f"/v1/batches/{_segment(batch_id)}"
        deadline = None if timeout is None else time.monotonic() + timeout
        etag: str | None = None
        current: BatchWithTasks | None = None
        while True:
            headers: dict[str, str] = {}
            wait = LONG_POLL_SECONDS
            if deadline is not None:
                wait = min(wait, int(deadline - time.monotonic()))
            if current is not None and wait >= 1:
                headers["Prefer"] = f"wait={wait}"
            if etag:
                headers["If-None-Match"] = etag
            body, answer, status = await self._http.json(
                "GET", path, headers=headers, accept=(304,), extra_timeout=float(max(wait, 0))
            )
            if status != 304:
                current = cast(BatchWithTasks, body)
                etag = answer.get("etag")
                if on_progress is not None:
                    result = on_progress(current)
                    if asyncio.iscoroutine(result):
                        await result
                if current["batch"]["done"]:
                    return current
            if deadline is not None and time.monotonic() >= deadline:
                raise KilnTimeoutError("wait_timeout", f"batch {batch_id} was not done within {timeout} s")
            if status == 304 and "preference-applied" not in answer:
                await asyncio.sleep(1.0)
            elif current is not None and "Prefer" not in headers:
                await asyncio.sleep(max(0.0, min(1.0, (deadline or 0) - time.monotonic())))

    async def cancel(self, batch_id: str) -> Batch:
        body, _, _ = await self._http.json("POST", f"/v1/batches/{_segment(batch_id)}/cancel")
        return cast(Batch, body)

    async def download(
        self, batch_id: str, folder: str | os.PathLike[str], concurrency: int = 4
    ) -> builtins.list[DownloadedFile]:
        """As `Kiln.batches.download`, `concurrency` files at a time; the list in task order."""
        target = Path(folder)
        target.mkdir(parents=True, exist_ok=True)
        tasks = (await self.get(batch_id))["tasks"]
        jobs = [(task, url) for task in tasks if task["status"] == "succeeded" for url in task["resultUrls"]]
        slots = asyncio.Semaphore(max(1, concurrency))

        async def fetch(job: tuple[Any, str]) -> DownloadedFile:
            task, url = job
            path = target / _file_name(url)
            if path.exists():
                return DownloadedFile(task, path, True)
            async with slots:
                part = path.with_name(path.name + ".part")
                async with self._http.stream("GET", url, authenticated=False, headers={"Accept": "*/*"}) as response:
                    await _save(response, part)
                os.replace(part, path)
                return DownloadedFile(task, path, False)

        return list(await asyncio.gather(*(fetch(job) for job in jobs)))

    async def archive(self, batch_id: str, path: str | os.PathLike[str]) -> Path:
        url = self._http.url(f"/v1/batches/{_segment(batch_id)}/archive")
        async with self._http.stream("GET", url, headers={"Accept": "application/zip"}) as response:
            target = Path(path)
            if target.is_dir():
                target = target / _attachment_name(response, f"kiln-{batch_id}.zip")
            part = target.with_name(target.name + ".part")
            await _save(response, part)
        os.replace(part, target)
        return target


async def _save(response: httpx.Response, part: Path) -> None:
    # Chunks are written as they come (small, local writes: not worth a thread each).
    try:
        with open(part, "wb") as out:
            async for chunk in response.aiter_bytes():
                out.write(chunk)
    except httpx.TransportError as err:
        part.unlink(missing_ok=True)
        raise KilnConnectionError("connection_failed", f"{response.url}: the answer broke off ({err})") from err
