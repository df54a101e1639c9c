"""models, estimate, create + wait + download + archive, idempotency, cancel, typed errors."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import httpx
import pytest

from kiln_client import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    Kiln,
    KilnConnectionError,
    KilnError,
    KilnTimeoutError,
    NotFoundError,
    ServerError,
)

PNG = b"\x89PNG\r\n\x1a\n"
MODEL = "beta-2-lite"  # 3 credits an image, 1K only; rendered by the builtin renderer


def balance(kiln: Kiln) -> int:
    return kiln.me()["credits"]["balance"]


def test_models_lists_the_catalog(kiln: Kiln) -> None:
    catalog = kiln.models.list()
    models = {m["key"]: m for m in catalog["models"]}
    assert models[MODEL]["creditCost"] == {"1K": 3}
    assert "1:1" in models[MODEL]["resolutionsByRatio"]
    assert isinstance(catalog["limits"], dict)


def test_estimate_prices_without_charging(kiln: Kiln) -> None:
    before = balance(kiln)
    estimate = kiln.batches.estimate(MODEL, ["a red fox", "a lighthouse"], count_per_combo=2)
    assert estimate["total"] == 4
    assert estimate["creditCost"] == 3
    assert estimate["creditsRequired"] == 12
    assert estimate["wouldCreate"] is True and estimate["refusal"] is None
    assert balance(kiln) == before


def test_create_wait_download_archive(recorded, tmp_path: Path) -> None:
    kiln, transport = recorded()
    created = kiln.batches.create(MODEL, ["a red fox in the snow", "a lighthouse at dusk"], note="python")
    assert created["status"] == "pending" and created["total"] == 2 and created["creditsCharged"] == 6
    assert created["replayed"] is False and created["idempotencyKey"]
    seen = []
    done = kiln.batches.wait(created["id"], timeout=120, on_progress=lambda b: seen.append(b["batch"]["counts"]))
    assert done["batch"]["done"] is True and done["batch"]["status"] == "succeeded"
    assert seen and seen[-1]["succeeded"] == 2
    # The create carried a key; the wait long-polled with the last ETag after its first read.
    create_request = next(r for r in transport.requests if r.method == "POST")
    assert create_request.headers["idempotency-key"] == created["idempotencyKey"]
    polls = [r for r in transport.requests if r.method == "GET" and r.url.path.endswith(created["id"])]
    assert "if-none-match" not in polls[0].headers
    for poll in polls[1:]:
        assert poll.headers["if-none-match"].startswith('W/"')
        assert poll.headers["prefer"].startswith("wait=")

    files = kiln.batches.download(created["id"], tmp_path / "images")
    short = created["id"][:8]
    assert sorted(f.path.name for f in files) == [f"kiln-{short}-0001.png", f"kiln-{short}-0002.png"]
    for f in files:
        assert f.skipped is False and f.path.read_bytes().startswith(PNG)
        assert f.task["status"] == "succeeded"
    assert not list((tmp_path / "images").glob("*.part"))
    # Result URLs are public: the key never goes with them.
    for r in transport.requests:
        if "/files/" in r.url.path:
            assert "authorization" not in r.headers
    again = kiln.batches.download(created["id"], tmp_path / "images")
    assert [f.skipped for f in again] == [True, True]

    archive = kiln.batches.archive(created["id"], tmp_path)
    assert archive.name == f"kiln-{created['id']}.zip"
    with zipfile.ZipFile(io.BytesIO(archive.read_bytes())) as z:
        names = z.namelist()
        assert "manifest.json" in names
        images = [n for n in names if n.startswith("images/")]
        assert len(images) == 2 and all(z.read(n).startswith(PNG) for n in images)
        assert json.loads(z.read("manifest.json"))["batch"]["id"] == created["id"]
    # The archive's images are the downloaded files, byte for byte.
    assert sorted(z_bytes for z_bytes in [f.path.read_bytes() for f in files]) == sorted(
        zipfile.ZipFile(archive).read(n) for n in images
    )


def test_the_same_idempotency_key_twice_is_one_batch(kiln: Kiln) -> None:
    before = balance(kiln)
    key = f"python-suite-{id(kiln)}"
    first = kiln.batches.create(MODEL, ["one batch only"], idempotency_key=key)
    second = kiln.batches.create(MODEL, ["one batch only"], idempotency_key=key)
    assert second["id"] == first["id"]
    assert (first["replayed"], second["replayed"]) == (False, True)
    assert balance(kiln) == before - first["creditsCharged"]
    with pytest.raises(BadRequestError) as refused:  # the same key, another body
        kiln.batches.create(MODEL, ["another body"], idempotency_key=key)
    assert (refused.value.code, refused.value.status) == ("idempotency_key_reused", 422)
    kiln.batches.wait(first["id"], timeout=120)


def test_a_lost_answer_is_retried_with_the_same_key_and_charged_once(kiln: Kiln, recorded) -> None:
    def lose_first_create(request: httpx.Request, n: int) -> object:
        if request.method == "POST" and n == 0:
            return httpx.ReadTimeout("the answer was lost", request=request)
        return None

    before = balance(kiln)
    client, transport = recorded(lose_first_create)
    created = client.batches.create(MODEL, ["made once"])
    assert transport.statuses == [201, 201]
    keys = {r.headers["idempotency-key"] for r in transport.requests}
    assert keys == {created["idempotencyKey"]}
    assert created["replayed"] is True  # the server's memory of the first, lost, answer
    assert balance(kiln) == before - 3
    kiln.batches.wait(created["id"], timeout=120)


@pytest.mark.parametrize("status", [429, 503])
def test_a_refusal_with_retry_after_is_retried(kiln: Kiln, recorded, status: int) -> None:
    def refuse_first(request: httpx.Request, n: int) -> object:
        if n == 0:
            body = {"error": {"code": "rate_limited" if status == 429 else "service_unavailable", "message": "later"}}
            return httpx.Response(status, headers={"Retry-After": "0"}, json=body, request=request)
        return None

    client, transport = recorded(refuse_first)
    created = client.batches.create(MODEL, [f"after a {status}"])
    assert transport.statuses == [status, 201]
    assert len({r.headers["idempotency-key"] for r in transport.requests}) == 1
    assert created["replayed"] is False
    kiln.batches.wait(created["id"], timeout=120)


def test_retries_are_bounded(recorded) -> None:
    def always_busy(request: httpx.Request, n: int) -> object:
        body = {"error": {"code": "service_unavailable", "message": "busy"}}
        return httpx.Response(503, headers={"Retry-After": "0", "X-Request-Id": f"r{n}"}, json=body, request=request)

    client, transport = recorded(always_busy, max_retries=2)
    with pytest.raises(KilnError) as failed:
        client.models.list()
    assert (failed.value.code, failed.value.status, failed.value.request_id) == ("service_unavailable", 503, "r2")
    assert len(transport.requests) == 3


def test_cancel_stops_a_batch_and_wait_times_out(kiln: Kiln) -> None:
    created = kiln.batches.create(MODEL, ["a field of poppies", "a harbour at night"], count_per_combo=20)
    with pytest.raises(KilnTimeoutError) as late:
        kiln.batches.wait(created["id"], timeout=0.2)
    assert (late.value.code, late.value.status) == ("wait_timeout", 0)
    batch = kiln.batches.cancel(created["id"])
    assert batch["id"] == created["id"] and batch["cancelledAt"] is not None
    assert batch["counts"]["cancelled"] > 0
    assert batch["creditsRefunded"] == 3 * batch["counts"]["cancelled"]
    done = kiln.batches.wait(created["id"], timeout=120)
    assert done["batch"]["status"] == "cancelled"
    assert kiln.batches.cancel(created["id"])["cancelledAt"] == batch["cancelledAt"]  # again: nothing changes


def test_a_finished_batch_is_not_cancellable(kiln: Kiln) -> None:
    created = kiln.batches.create(MODEL, ["finished first"])
    kiln.batches.wait(created["id"], timeout=120)
    with pytest.raises(ConflictError) as refused:
        kiln.batches.cancel(created["id"])
    assert (refused.value.code, refused.value.status) == ("batch_not_cancellable", 409)


def test_a_deadline_is_sent_and_shown(kiln: Kiln) -> None:
    import time

    soon = int(time.time() * 1000) + 60 * 60 * 1000
    created = kiln.batches.create(MODEL, ["by the hour"], deadline=soon)
    assert kiln.batches.get(created["id"])["batch"]["deadline"] == soon
    kiln.batches.wait(created["id"], timeout=120)

    before = balance(kiln)
    with pytest.raises(BadRequestError) as past:
        kiln.batches.create(MODEL, ["too late"], deadline=int(time.time() * 1000) - 1000)
    assert (past.value.code, past.value.details.get("field")) == ("invalid_request", "deadline")
    assert balance(kiln) == before


def test_errors_are_typed(kiln: Kiln) -> None:
    before = balance(kiln)
    with pytest.raises(BadRequestError) as bad_model:
        kiln.batches.create("no-such-model", ["a red fox"])
    err = bad_model.value
    assert (err.code, err.status) == ("unknown_model", 400)
    assert err.request_id and err.message
    assert isinstance(err, KilnError)
    assert balance(kiln) == before  # a refusal changes nothing

    with pytest.raises(BadRequestError) as unknown_field:
        kiln.batches.estimate(MODEL, ["x"], extra_body={"colour": "red"})
    assert unknown_field.value.code == "invalid_request"
    assert unknown_field.value.details.get("reason") == "unknown_field"

    with pytest.raises(NotFoundError) as missing:
        kiln.batches.get("00000000-0000-4000-8000-000000000000")
    assert (missing.value.code, missing.value.status) == ("not_found", 404)
    with pytest.raises(NotFoundError):
        kiln.batches.get("../me")  # quoted: never another route

    with Kiln(api_key="kiln_live_not-a-key") as stranger, pytest.raises(AuthenticationError) as denied:
        stranger.models.list()
    assert (denied.value.code, denied.value.status) == ("invalid_api_key", 401)


def test_no_answer_is_a_connection_error() -> None:
    nowhere = Kiln(api_key="kiln_live_x", base_url="http://127.0.0.1:9", max_retries=1, timeout=2)
    with nowhere, pytest.raises(KilnConnectionError) as failed:
        nowhere.models.list()
    assert (failed.value.code, failed.value.status) == ("connection_failed", 0)


def test_list_pages_through_every_batch(kiln: Kiln) -> None:
    ids = [b["id"] for b in kiln.batches.list(page_size=2)]
    assert len(ids) >= 3 and len(set(ids)) == len(ids)


def test_answers_that_are_not_kilns_are_typed_too(recorded) -> None:
    def proxy(request: httpx.Request, n: int) -> object:
        if n == 0:
            return httpx.Response(302, headers={"Location": "https://elsewhere.example/"}, request=request)
        return httpx.Response(502, text="<html>Bad Gateway</html>", request=request)

    client, transport = recorded(proxy, max_retries=0)
    with pytest.raises(KilnError) as moved:
        client.models.list()
    assert (moved.value.code, moved.value.status) == ("unexpected_redirect", 302)
    with pytest.raises(ServerError) as gateway:
        client.models.list()
    assert (gateway.value.code, gateway.value.status) == ("http_502", 502)
    assert len(transport.requests) == 2  # nothing followed, nothing retried (max_retries=0)
