"""AsyncKiln: the same calls on asyncio (run with asyncio.run: no plugin needed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from kiln_client import AsyncKiln, BadRequestError, KilnTimeoutError

PNG = b"\x89PNG\r\n\x1a\n"
MODEL = "beta-2-lite"


class LoseFirstCreate(httpx.AsyncBaseTransport):
    """Sends every request; the first create's answer is then lost (the server did create it)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.requests: list[httpx.Request] = []
        self.creates = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path == "/v1/batches":
            self.creates += 1
        if request.method == "POST" and request.url.path == "/v1/batches" and self.creates == 1:
            await response.aread()
            await response.aclose()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_async_create_wait_download_archive(tmp_path: Path) -> None:
    async def run() -> None:
        transport = LoseFirstCreate()
        async with AsyncKiln(transport=transport) as kiln:
            assert any(m["key"] == MODEL for m in (await kiln.models.list())["models"])
            before = (await kiln.me())["credits"]["balance"]
            assert (await kiln.batches.estimate(MODEL, ["a", "b"]))["creditsRequired"] == 6
            created = await kiln.batches.create(MODEL, ["an async fox", "an async lighthouse"])
            assert created["replayed"] is True  # the lost first answer, replayed under the same key
            creates = [r for r in transport.requests if r.url.path == "/v1/batches"]
            assert len(creates) == 2 and len({r.headers["idempotency-key"] for r in creates}) == 1
            assert (await kiln.me())["credits"]["balance"] == before - 6

            seen: list[int] = []

            async def progress(b: dict) -> None:  # a coroutine function works as on_progress
                seen.append(b["batch"]["counts"]["succeeded"])

            done = await kiln.batches.wait(created["id"], timeout=120, on_progress=progress)
            assert done["batch"]["status"] == "succeeded" and seen[-1] == 2
            files = await kiln.batches.download(created["id"], tmp_path / "images", concurrency=2)
            assert [f.task["index"] for f in files] == [1, 2]
            assert all(f.path.read_bytes().startswith(PNG) and not f.skipped for f in files)
            assert [f.skipped for f in await kiln.batches.download(created["id"], tmp_path / "images")] == [True, True]
            archive = await kiln.batches.archive(created["id"], tmp_path)
            assert archive.name == f"kiln-{created['id']}.zip" and archive.stat().st_size > 0
            ids = [b["id"] async for b in kiln.batches.list(page_size=1)]
            assert created["id"] in ids

    asyncio.run(run())


def test_async_errors_cancel_and_wait_timeout() -> None:
    async def run() -> None:
        async with AsyncKiln() as kiln:
            with pytest.raises(BadRequestError) as bad:
                await kiln.batches.estimate("no-such-model", ["x"])
            assert (bad.value.code, bad.value.status) == ("unknown_model", 400) and bad.value.request_id
            created = await kiln.batches.create(MODEL, ["poppies", "a harbour"], count_per_combo=20)
            with pytest.raises(KilnTimeoutError):
                await kiln.batches.wait(created["id"], timeout=0.2)
            batch = await kiln.batches.cancel(created["id"])
            assert batch["cancelledAt"] is not None and batch["counts"]["cancelled"] > 0
            assert (await kiln.batches.wait(created["id"], timeout=120))["batch"]["status"] == "cancelled"

    asyncio.run(run())
