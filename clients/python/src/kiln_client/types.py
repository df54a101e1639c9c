"""The API's objects as docs/api.md defines them, typed as TypedDicts.

Answers are returned as the JSON the server sent (camelCase keys, times in Unix ms), so a
field the server adds later is there at run time before these types name it.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

Resolution = Literal["1K", "2K", "4K"]
BatchTier = Literal["standard", "economy"]
RefMode = Literal["none", "each", "combined"]
Quality = Literal["auto", "low", "medium", "high"]
OutputFormat = Literal["png", "jpeg", "webp"]
BatchStatus = Literal["pending", "running", "succeeded", "partial", "failed", "cancelled"]
TaskStatus = Literal["pending", "queued", "running", "succeeded", "failed", "cancelled"]


class Model(TypedDict):
    key: str
    displayName: str
    blurb: str
    creditCost: dict[str, int]
    economyCreditCost: dict[str, int] | None
    economyWindowHours: int | None
    aspectRatios: list[str]
    resolutions: list[str]
    resolutionsByRatio: dict[str, list[str]]
    supportsRefImages: bool
    maxRefImages: int
    supportsQuality: bool
    supportsBackground: bool
    maxPromptLength: int


class ModelCatalog(TypedDict):
    models: list[Model]
    defaults: dict[str, Any]
    limits: dict[str, Any]


class Counts(TypedDict):
    pending: int
    running: int
    succeeded: int
    failed: int
    cancelled: int


class Batch(TypedDict):
    id: str
    createdAt: int
    prompts: list[str]
    model: str
    aspectRatio: str
    resolution: str
    quality: str
    background: str | None
    countPerCombo: int
    refMode: str
    refImages: list[str]
    total: int
    note: str | None
    seed: int | None
    outputFormat: str
    counts: Counts
    previewUrl: str | None
    createdViaApi: bool
    status: BatchStatus
    done: bool
    creditsCharged: int
    creditsRefunded: int
    cancelledAt: int | None
    tier: BatchTier
    expiresAt: int | None
    deadline: int | None
    cancelReason: str | None


class Task(TypedDict):
    id: str
    batchId: str
    prompt: str
    status: TaskStatus
    progress: int
    resultUrls: list[str]
    error: str | None
    index: int
    promptIndex: int
    refImage: str | None
    copy: int
    width: int | None
    height: int | None
    errorCode: str | None
    startedAt: int | None
    """When a worker first took the task (epoch ms; a retry keeps it); None before."""
    finishedAt: int | None
    """When it ended: succeeded, failed or cancelled (epoch ms); None before."""


class BatchWithTasks(TypedDict):
    """`GET /v1/batches/{id}`: the batch and its tasks in fan-out order."""

    batch: Batch
    tasks: list[Task]


class BatchCreated(TypedDict):
    """`POST /v1/batches`'s 201, plus what the client knows about the request.

    `replayed` is true when the server answered from its memory of an earlier request with the
    same `idempotencyKey` (header `Idempotent-Replayed: true`): nothing was created or charged.
    """

    id: str
    total: int
    creditsCharged: int
    status: str
    tier: BatchTier
    idempotencyKey: str
    replayed: bool


class ErrorBody(TypedDict, total=False):
    code: str
    message: str
    details: dict[str, Any]


class DailyCap(TypedDict):
    cap: int
    used: int
    remaining: int
    resetsAt: int


class Estimate(TypedDict):
    total: int
    tier: BatchTier
    creditCost: int
    creditsRequired: int
    balance: int
    dailyCap: DailyCap | None
    wouldCreate: bool
    refusal: ErrorBody | None


class Account(TypedDict):
    """`GET /v1/me`: the account, its balance, its plan's limits and this key's use."""

    user: dict[str, Any]
    credits: dict[str, int]
    limits: dict[str, Any]
    key: dict[str, Any]


class WebhookEvent(TypedDict):
    """A webhook delivery's body: `data` is a Task, a Batch or `{"endpointId"}` by `type`."""

    id: str
    type: str
    createdAt: int
    data: dict[str, Any]
