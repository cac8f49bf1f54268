"""``/_sim`` routes: truth queries and fault control for another process. No key, never counted."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse

from scrape_pipeline_local.simulator import views
from scrape_pipeline_local.simulator.engine import Simulator
from scrape_pipeline_local.simulator.errors import ApiError


def _apply_faults(sim: Simulator, body: dict[str, Any]) -> None:
    """Apply a ``POST /_sim/faults`` body: clear/reset, levels, burst, lost answers, webhooks."""
    if body.pop("reset", False):
        sim.faults.reset()
    if body.pop("clear", False):
        sim.faults.clear()
    burst = body.pop("burst", None)
    lost = body.pop("lose_answers", None)
    webhooks = body.pop("webhooks", None) or {}
    if body:
        sim.faults.update(**body)
    if burst is not None:
        sim.faults.burst(
            count=burst.get("count"),
            duration_s=burst.get("duration_s"),
            status=int(burst.get("status", 503)),
        )
    if lost is not None:
        sim.faults.lose_answers(str(lost["route"]), list(lost["answers"]))
    for webhook_id, switch in webhooks.items():
        sim.set_webhook_active(webhook_id, bool(switch["is_active"]))


def sim_router(sim: Simulator) -> APIRouter:
    """Truth and control routes bound to ``sim``."""
    router = APIRouter(prefix="/_sim")

    @router.get("/health")
    async def health() -> JSONResponse:
        return JSONResponse({"ok": True, "now": sim.clock.time()})

    @router.get("/truth/jobs")
    async def truth_jobs(kind: str | None = None, account: str | None = None) -> JSONResponse:
        return JSONResponse({"items": sim.truth_jobs(kind, account)})

    @router.get("/truth/submissions")
    async def truth_submissions() -> JSONResponse:
        return JSONResponse({"submissions": sim.submissions()})

    @router.get("/truth/deliveries")
    async def truth_deliveries() -> JSONResponse:
        return JSONResponse({"items": sim.delivery_attempts()})

    @router.get("/truth/events")
    async def truth_events() -> JSONResponse:
        return JSONResponse({"items": sim.webhook_events()})

    @router.get("/truth/requests")
    async def truth_requests() -> JSONResponse:
        return JSONResponse(sim.request_counts())

    @router.get("/faults")
    async def get_faults() -> JSONResponse:
        return JSONResponse(sim.faults.snapshot())

    @router.post("/faults")
    async def post_faults(body: dict[str, Any] = Body(...)) -> JSONResponse:  # noqa: B008
        try:
            _apply_faults(sim, dict(body))
        except (ValueError, TypeError, KeyError) as exc:
            raise ApiError("BAD_REQUEST", f"bad fault settings: {exc}") from exc
        return JSONResponse(sim.faults.snapshot())

    @router.post("/balance")
    async def top_up(body: dict[str, Any] = Body(...)) -> JSONResponse:  # noqa: B008
        account = str(body.get("account") or sim.config.api_keys[0])
        tokens = body.get("tokens")
        balance = sim.top_up(account, None if tokens is None else int(tokens))
        return JSONResponse({"account": account, "balance": balance})

    @router.post("/reset")
    async def reset() -> JSONResponse:
        sim.reset()
        return JSONResponse({"ok": True})

    @router.post("/pump")
    async def pump() -> JSONResponse:
        # Blocking waits run in a worker thread so the server keeps answering meanwhile.
        return JSONResponse({"sent": await run_in_threadpool(sim.pump)})

    @router.post("/drain")
    async def drain(timeout: float = 10.0) -> JSONResponse:
        return JSONResponse({"idle": await run_in_threadpool(sim.drain, timeout)})

    @router.get("/clock")
    async def get_clock() -> JSONResponse:
        return JSONResponse({"now": sim.clock.time(), "next_due": sim.next_due()})

    @router.post("/clock/advance")
    async def advance_clock(body: dict[str, float] = Body(...)) -> JSONResponse:  # noqa: B008
        advance = getattr(sim.clock, "advance", None)
        if advance is None:
            raise ApiError("CONFLICT", "this simulator's clock cannot be advanced")
        advance(float(body.get("seconds", 0.0)))
        return JSONResponse({"now": sim.clock.time()})

    @router.post("/extract/{job_id}/cancel")
    async def cancel_extract(job_id: str) -> JSONResponse:
        job = sim.cancel_extract(job_id)
        return JSONResponse(views.extract_job(job, sim.clock.time()))

    @router.post("/batch/{batch_id}/cancel")
    async def cancel_batch(batch_id: str) -> JSONResponse:
        batch, in_flight = sim.cancel_batch(batch_id)
        now = sim.clock.time()
        return JSONResponse({**views.batch_summary(batch, now), "in_flight_urls": in_flight})

    return router
