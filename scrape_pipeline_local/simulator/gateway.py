"""The ASGI layer in front of every route: correlation ids, then faults, auth and rate limit."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from starlette.datastructures import Headers, MutableHeaders
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scrape_pipeline_local.simulator.engine import Simulator
from scrape_pipeline_local.simulator.errors import ApiError, error_response
from scrape_pipeline_local.simulator.faults import JobAnswer, LostAnswer

API_PREFIX = "/v1/"
# The routes that read one job: counted per job, and where a sick job's fault answers.
JOB_ROUTES = frozenset(
    {"GET /v1/extract/{job_id}", "GET /v1/batch/{batch_id}", "GET /v1/crawl/{crawl_id}"}
)


class _Dropped(Exception):
    """Raised after a response was started: the server closes the connection unanswered."""


def quiet_dropped(record: logging.LogRecord) -> bool:
    """A filter for the server's error log: a dropped connection is a fault, not a bug."""
    return not (record.exc_info and isinstance(record.exc_info[1], _Dropped))


class Gateway:
    """Gives every response an ``X-Correlation-Id``; admits and counts ``/v1`` requests.

    A pure ASGI middleware (not BaseHTTPMiddleware) to keep per-request cost small.
    """

    def __init__(self, app: ASGIApp, sim: Simulator, routes: list[BaseRoute]) -> None:
        self.app = app
        self.sim = sim
        self.routes = routes  # the /v1 routes, matched here to label even refused requests

    def _route(self, scope: Scope) -> str:
        """The matched route template, e.g. ``GET /v1/extract/{job_id}``, for counting."""
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                return f"{scope['method']} {getattr(route, 'path', '?')}"
        return f"{scope['method']} <unmatched>"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        correlation_id = self.sim.new_correlation_id()
        state = scope.setdefault("state", {})
        state["correlation_id"] = correlation_id
        counted = scope["path"].startswith(API_PREFIX)
        api_key = Headers(scope=scope).get("x-api-key") if counted else None
        route = self._route(scope) if counted else ""
        job_id = str(scope["path"]).rstrip("/").rsplit("/", 1)[-1] if route in JOB_ROUTES else None

        def record(status: int) -> None:
            nonlocal counted
            if counted:
                counted = False
                self.sim.stats.record(self._label(api_key), route, status, job_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Counted before the client can see the answer, so truth is never behind.
                record(message["status"])
                headers = MutableHeaders(scope=message)
                if "x-correlation-id" not in headers:
                    headers.append("X-Correlation-Id", correlation_id)
            await send(message)

        if not scope["path"].startswith(API_PREFIX):
            await self.app(scope, receive, send_with_id)
            return
        fault = self.sim.faults.job_fault(job_id) if job_id is not None else None
        if fault is not None and fault.answer == "timeout":
            record(504)  # no answer: counted as the gateway timeout it is
            await send_with_id({"type": "http.response.start", "status": 504, "headers": []})
            raise _Dropped(job_id)
        try:
            refusal = self.sim.admit(api_key, route)
            if refusal is None and fault is not None:
                refusal = ApiError.for_status(int(fault.answer), "injected fault for this job")
            if refusal is None:
                state["account"] = self.sim.account_of(api_key)
                lost = self.sim.faults.lost_answer(route)
                if lost is not None:
                    await self._lose_answer(scope, receive, send_with_id, lost, record, route=route)
                    return
                await self.app(scope, receive, send_with_id)
            else:
                legacy = self.sim.config.legacy_error_shape
                await error_response(refusal, correlation_id, legacy=legacy)(
                    scope, receive, send_with_id
                )
        finally:
            record(500)  # no answer was started: the request failed inside the simulator

    async def _lose_answer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        answer: JobAnswer,
        record: Callable[[int], None],
        *,
        route: str,
    ) -> None:
        """Carry the request out, then answer ``answer`` instead of its own answer; the
        faults' log keeps what it made (its job id, from the answer the client never saw)."""
        status = 504 if answer == "timeout" else int(answer)
        record(status)  # the record shows what the client saw; the truth, what was done
        asked: list[bytes] = []
        answered: list[bytes] = []

        async def reading() -> Message:
            message = await receive()
            asked.append(message.get("body", b""))
            return message

        async def discard(message: Message) -> None:
            answered.append(message.get("body", b""))

        await self.app(scope, reading, discard)
        self.sim.faults.note_lost(self._lost(route, b"".join(asked), b"".join(answered)))
        if answer == "timeout":
            await asyncio.sleep(self.sim.config.lost_answer_hold_s)
            await send({"type": "http.response.start", "status": 504, "headers": []})
            raise _Dropped(scope["path"])
        error = ApiError.for_status(status, "injected fault: the answer was lost")
        legacy = self.sim.config.legacy_error_shape
        correlation_id = scope["state"]["correlation_id"]
        await error_response(error, correlation_id, legacy=legacy)(scope, receive, send)

    def _lost(self, route: str, asked: bytes, answered: bytes) -> LostAnswer:
        """What a request whose answer is lost made, read from its body and its answer."""
        request, answer = _json(asked), _json(answered)
        urls = request.get("urls") or ([request["url"]] if "url" in request else [])
        posts = self.sim.submissions()
        return LostAnswer(
            at=self.sim.clock.time(),
            route=route,
            job_id=answer.get("job_id"),
            urls=tuple(str(url) for url in urls),
            first_post=all(posts.get(str(url), 0) == 1 for url in urls),
        )

    def _label(self, api_key: str | None) -> str:
        if api_key is None:
            return "<missing>"
        return self.sim.account_of(api_key) or "<invalid>"


def _json(body: bytes) -> dict[str, Any]:
    """A JSON object body, or {} (an error answer's shape, or no body)."""
    try:
        parsed = json.loads(body) if body else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
