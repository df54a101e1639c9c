"""The `Kiln` client: the public /v1 API as methods (docs/api.md)."""

from __future__ import annotations

import builtins
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote, unquote, urlsplit

import httpx

from . import __version__
from ._http import Http
from .errors import KilnConnectionError, KilnError, KilnTimeoutError
from .types import (
    Account,
    Batch,
    BatchCreated,
    BatchTier,
    BatchWithTasks,
    Estimate,
    ModelCatalog,
    OutputFormat,
    Quality,
    RefMode,
    Resolution,
    Task,
)

DEFAULT_BASE_URL = "http://localhost:8080"
# Held by the server at most this long per long poll (docs/api.md allows up to 60 s).
LONG_POLL_SECONDS = 30
# A result file's name, as Kiln makes them (kiln-<8 of the batch id>-<index>.<ext>) and more.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


@dataclass(frozen=True)
class DownloadedFile:
    """One image of `batches.download`: its task, where it is, and whether it was there already."""

    task: Task
    path: Path
    skipped: bool


class Kiln:
    """A client for one Kiln and one API key.

    `api_key` defaults to `KILN_API_KEY`, `base_url` to `KILN_URL` (else
    http://localhost:8080); `timeout` is one request's limit in seconds, `max_retries` how often a
    transient failure is retried. `transport` replaces httpx's (tests, proxies).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("KILN_API_KEY")
        if not key:
            raise ValueError("no API key: pass api_key= or set KILN_API_KEY")
        self._http = Http(
            base_url=base_url or os.environ.get("KILN_URL") or DEFAULT_BASE_URL,
            api_key=key,
            timeout=timeout,
            max_retries=max_retries,
            user_agent=f"kiln-client-python/{__version__}",
            transport=transport,
        )
        self.models = Models(self._http)
        self.batches = Batches(self._http)

    def me(self) -> Account:
        """`GET /v1/me`: the account, its balance, its plan's limits and this key's use."""
        body, _, _ = self._http.json("GET", "/v1/me")
        return cast(Account, body)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Kiln:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Models:
    def __init__(self, http: Http) -> None:
        self._http = http

    def list(self) -> ModelCatalog:
        """`GET /v1/models`: the enabled models, their prices and legal sizes, defaults, limits."""
        body, _, _ = self._http.json("GET", "/v1/models")
        return cast(ModelCatalog, body)


def batch_body(
    model: str,
    prompts: Sequence[str],
    *,
    aspect_ratio: str | None = None,
    resolution: Resolution | None = None,
    count_per_combo: int | None = None,
    ref_mode: RefMode | None = None,
    ref_images: Sequence[str] | None = None,
    quality: Quality | None = None,
    background: str | None = None,
    note: str | None = None,
    seed: int | None = None,
    tier: BatchTier | None = None,
    output_format: OutputFormat | None = None,
    deadline: int | None = None,
    extra_body: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON of a batch request (docs/api.md, "Batch creation request"); None means the default."""
    fields: dict[str, Any] = {
        "model": model,
        "prompts": list(prompts),
        "aspectRatio": aspect_ratio,
        "resolution": resolution,
        "countPerCombo": count_per_combo,
        "refMode": ref_mode,
        "refImages": list(ref_images) if ref_images is not None else None,
        "quality": quality,
        "background": background,
        "note": note,
        "seed": seed,
        "tier": tier,
        "outputFormat": output_format,
        "deadline": deadline,  # Unix ms: work not sent upstream by then is cancelled and refunded
    }
    body = {k: v for k, v in fields.items() if v is not None}
    body.update(extra_body or {})  # a field newer than this client, sent as given
    return body


class Batches:
    def __init__(self, http: Http) -> None:
        self._http = http

    def estimate(self, model: str, prompts: Sequence[str], **options: Any) -> Estimate:
        """`POST /v1/batches/estimate`: what `create` with the same arguments would charge now.

        Refuses as create does (same codes); nothing is charged or written.
        """
        body, _, _ = self._http.json("POST", "/v1/batches/estimate", json_body=batch_body(model, prompts, **options))
        return cast(Estimate, body)

    def create(
        self, model: str, prompts: Sequence[str], *, idempotency_key: str | None = None, **options: Any
    ) -> BatchCreated:
        """`POST /v1/batches`: charges the batch and returns at once (`status` pending).

        Options are `batch_body`'s: aspect_ratio, resolution, count_per_combo, ref_mode,
        ref_images, quality, background, note, seed, tier, output_format, deadline (Unix ms), extra_body. Every call
        sends an `Idempotency-Key` (a random UUID unless given), the same on each of its own
        retries, so a retried create after a lost answer is the same batch, charged once. Pass
        your own key (stable across processes) to make a create safe across a crash too.
        """
        key = idempotency_key or str(uuid.uuid4())
        body, headers, _ = self._http.json(
            "POST",
            "/v1/batches",
            json_body=batch_body(model, prompts, **options),
            headers={"Idempotency-Key": key},
        )
        created = dict(body)
        created["idempotencyKey"] = key
        created["replayed"] = headers.get("idempotent-replayed") == "true"
        return cast(BatchCreated, created)

    def get(self, batch_id: str) -> BatchWithTasks:
        """`GET /v1/batches/{id}`: the batch and its tasks."""
        body, _, _ = self._http.json("GET", f"/v1/batches/{_segment(batch_id)}")
        return cast(BatchWithTasks, body)

    def list(self, page_size: int | None = None) -> Iterator[Batch]:
        """Every batch of the account, newest first, page after page (`GET /v1/batches`)."""
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {}
            if page_size is not None:
                params["limit"] = page_size
            if cursor:
                params["cursor"] = cursor
            body, _, _ = self._http.json("GET", "/v1/batches", params=params)
            yield from body["batches"]
            cursor = body.get("nextCursor")
            if not cursor:
                return

    def wait(
        self,
        batch_id: str,
        timeout: float | None = None,
        on_progress: Callable[[BatchWithTasks], None] | None = None,
    ) -> BatchWithTasks:
        """Returns the batch and its tasks once `batch.done`, by long polling.

        Each request sends the last `ETag` in `If-None-Match` with `Prefer: wait=N`: the server
        answers as soon as the batch changes (then `on_progress` is called) or with 304 after N
        seconds, so an idle batch costs one request per 30 s. Against a server that does not
        hold requests (no `Preference-Applied`) it polls once a second. `timeout` (seconds)
        ends the wait with `KilnTimeoutError` (code `wait_timeout`); the batch goes on.
        """
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
            body, answer, status = self._http.json(
                "GET", path, headers=headers, accept=(304,), extra_timeout=float(max(wait, 0))
            )
            if status != 304:
                current = cast(BatchWithTasks, body)
                etag = answer.get("etag")
                if on_progress is not None:
                    on_progress(current)
                if current["batch"]["done"]:
                    return current
            if deadline is not None and time.monotonic() >= deadline:
                raise KilnTimeoutError("wait_timeout", f"batch {batch_id} was not done within {timeout} s")
            if status == 304 and "preference-applied" not in answer:
                # Not held (an older server, or this key's held requests at their cap): poll gently.
                time.sleep(1.0)
            elif current is not None and "Prefer" not in headers:
                time.sleep(max(0.0, min(1.0, (deadline or 0) - time.monotonic())))

    def cancel(self, batch_id: str) -> Batch:
        """`POST /v1/batches/{id}/cancel`: cancels and refunds what was not yet sent; the batch after it.

        A batch that finished without a cancel raises `ConflictError` `batch_not_cancellable`.
        """
        body, _, _ = self._http.json("POST", f"/v1/batches/{_segment(batch_id)}/cancel")
        return cast(Batch, body)

    def download(self, batch_id: str, folder: str | os.PathLike[str]) -> builtins.list[DownloadedFile]:
        """Writes each succeeded image of the batch into `folder` (made if missing), streamed.

        A file is named after the last segment of its result URL (`kiln-<8 of the batch
        id>-<index>.png`: unique across batches), written as `<name>.part` and renamed once
        complete, so a file under its own name is whole: a second call skips it and fetches only
        what is missing. Result URLs are public; the API key is not sent with them. Call `wait`
        first for every image; before that this takes what has succeeded so far.
        """
        target = Path(folder)
        target.mkdir(parents=True, exist_ok=True)
        tasks = self.get(batch_id)["tasks"]
        files: list[DownloadedFile] = []
        for task in tasks:
            if task["status"] != "succeeded":
                continue
            for url in task["resultUrls"]:
                path = target / _file_name(url)
                if path.exists():
                    files.append(DownloadedFile(task, path, True))
                    continue
                part = path.with_name(path.name + ".part")
                with self._http.stream("GET", url, authenticated=False, headers={"Accept": "*/*"}) as response:
                    _save(response, part)
                os.replace(part, path)
                files.append(DownloadedFile(task, path, False))
        return files

    def archive(self, batch_id: str, path: str | os.PathLike[str]) -> Path:
        """`GET /v1/batches/{id}/archive`: the batch as a zip (images and manifest.json), streamed to `path`.

        When `path` is a folder the file is named as the server says (`kiln-<id>.zip`). Written
        as `<name>.part` and renamed once complete. A full server (503) or the account's own
        limit (429) is retried after its Retry-After, before any byte is written.
        """
        url = self._http.url(f"/v1/batches/{_segment(batch_id)}/archive")
        with self._http.stream("GET", url, headers={"Accept": "application/zip"}) as response:
            target = Path(path)
            if target.is_dir():
                target = target / _attachment_name(response, f"kiln-{batch_id}.zip")
            part = target.with_name(target.name + ".part")
            _save(response, part)
        os.replace(part, target)
        return target


def _save(response: httpx.Response, part: Path) -> None:
    """Streams the body to `part`; a connection lost halfway leaves no file behind."""
    try:
        with open(part, "wb") as out:
            for chunk in response.iter_bytes():
                out.write(chunk)
    except httpx.TransportError as err:
        part.unlink(missing_ok=True)
        raise KilnConnectionError("connection_failed", f"{response.url}: the answer broke off ({err})") from err


def _segment(batch_id: str) -> str:
    # Quoted whole, so an odd id is the server's 404 `not_found`, never another route.
    return quote(batch_id, safe="")


def _file_name(url: str) -> str:
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if not _SAFE_NAME.fullmatch(name) or name.endswith(".part"):
        raise KilnError("invalid_result_url", f"refusing to write a file named {name!r} (from {url})")
    return name


def _attachment_name(response: httpx.Response, default: str) -> str:
    match = re.search(r'filename="([^"]+)"', response.headers.get("content-disposition", ""))
    name = match.group(1) if match else default
    return name if _SAFE_NAME.fullmatch(name) else default
