"""The REST side of the load test: log in, create users, vocabularies and meetings, get tickets, read back
persisted captions and scrape /metrics and /readyz (docs/protocol.md)."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from loadtest.vocabulary import generate_terms

REQUEST_TIMEOUT_S = 120.0  # vocabulary compiles and logins (argon2) are slow on a loaded 2-core machine


class ApiFailure(RuntimeError):
    """A REST call the load test depends on failed; the message names the call and the server's answer."""


def _check(response: httpx.Response, what: str) -> dict:
    if response.status_code >= 400:
        raise ApiFailure(f"{what}: HTTP {response.status_code}: {response.text[:300]}")
    return response.json() if response.content else {}


async def login(base_url: str, username: str, password: str) -> httpx.AsyncClient:
    """A client with the session cookie that sends the CSRF header on every request (caller closes it)."""
    client = httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_S)
    try:
        body = _check(
            await client.post("/api/auth/login", json={"username": username, "password": password}),
            f"login as {username}",
        )
    except BaseException:
        await client.aclose()
        raise
    client.headers["x-csrf-token"] = body["csrf_token"]
    return client


@dataclass(frozen=True)
class FleetPlan:
    """How meetings are made: each with its own ``terms``-term vocabulary (0 = none), ``chunk_s`` and
    ``decoding``; ``run_id`` keeps names of different runs apart."""

    terms: int
    chunk_s: float
    decoding: str
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))


@dataclass
class Fleet:
    """The accounts and meetings a run uses, grown step by step; ``close()`` closes every HTTP client.

    ``users[0]`` is the admin (it streams too: one slow argon2 login less per run)."""

    base_url: str
    plan: FleetPlan
    admin: httpx.AsyncClient
    users: list[httpx.AsyncClient] = field(default_factory=list)
    meeting_ids: list[int] = field(default_factory=list)

    async def grow(self, meetings: int, users: int) -> None:
        """Create accounts and meetings until there are at least ``users`` and ``meetings``; each meeting is
        started, so its vocabulary is compiled on the server before any audio is streamed."""
        while len(self.users) < users:
            username = f"loadtest-{self.plan.run_id}-{len(self.users)}"
            password = secrets.token_urlsafe(16)
            body = {"username": username, "password": password}
            _check(await self.admin.post("/api/users", json=body), "create user")
            self.users.append(await login(self.base_url, username, password))
        while len(self.meeting_ids) < meetings:
            self.meeting_ids.append(await _create_meeting(self.admin, self.plan, len(self.meeting_ids)))

    async def ticket(self, user: int, meeting_id: int) -> str:
        """A fresh single-use ticket for ``meeting_id``, asked for by user ``user``."""
        body = _check(await self.users[user].post(f"/api/meetings/{meeting_id}/ticket"), "ticket")
        return body["ticket"]

    async def persisted_finals(self, meeting_ids: set[int]) -> list[dict[str, Any]]:
        """Every persisted final of those meetings (``session_id``, ``seq``, ``start_s``, ``end_s``...)."""
        out: list[dict[str, Any]] = []
        for meeting_id in sorted(meeting_ids):
            body = _check(await self.admin.get(f"/api/meetings/{meeting_id}/captions"), "captions")
            out.extend(body["captions"])
        return out

    async def close(self) -> None:
        await asyncio.gather(*(u.aclose() for u in {id(c): c for c in [self.admin, *self.users]}.values()))


async def open_fleet(base_url: str, admin_password: str, plan: FleetPlan) -> Fleet:
    """Log in as the admin; accounts and meetings are added by ``Fleet.grow``."""
    admin = await login(base_url, "admin", admin_password)
    return Fleet(base_url, plan, admin, [admin])


async def _create_meeting(admin: httpx.AsyncClient, plan: FleetPlan, index: int) -> int:
    vocabulary_ids = []
    if plan.terms > 0:
        vocab = _check(
            await admin.post("/api/vocabularies", json={"name": f"loadtest {plan.run_id} meeting {index}"}),
            "create vocabulary",
        )["vocabulary"]
        terms = generate_terms(plan.terms, seed=index)
        _check(await admin.post(f"/api/vocabularies/{vocab['id']}/terms", json={"terms": terms}), "add terms")
        vocabulary_ids = [vocab["id"]]
    meeting = _check(
        await admin.post(
            "/api/meetings",
            json={
                "title": f"loadtest {plan.run_id} #{index}",
                "chunk_s": plan.chunk_s,
                "decoding": plan.decoding,
                "vocabulary_ids": vocabulary_ids,
            },
        ),
        "create meeting",
    )["meeting"]
    _check(await admin.post(f"/api/meetings/{meeting['id']}/start"), "start meeting")
    return meeting["id"]


async def scrape_metrics(client: httpx.AsyncClient) -> dict[str, float]:
    """/metrics as ``{sample name (with labels as name{k=v}): value}``."""
    response = await client.get("/metrics")
    response.raise_for_status()
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return values


async def is_ready(client: httpx.AsyncClient) -> bool:
    """Whether /readyz answers 200."""
    return (await client.get("/readyz")).status_code == 200
