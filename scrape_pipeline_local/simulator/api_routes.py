"""The ``/v1`` routes of the Geonode Scraper API contract, as thin wrappers over the Simulator."""

from __future__ import annotations

from typing import Annotated, Literal, cast

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.responses import JSONResponse

from scrape_pipeline_local.simulator import views
from scrape_pipeline_local.simulator.engine import JobFilter, Simulator
from scrape_pipeline_local.simulator.errors import ApiError
from scrape_pipeline_local.simulator.models import (
    BatchRequest,
    CrawlRequest,
    ExtractRequest,
    Format,
    WebhookCreate,
    WebhookUpdate,
)
from scrape_pipeline_local.simulator.timefmt import parse_iso

JobStatus = Literal["queued", "processing", "completed", "failed", "cancelled"]
DeliveryStatus = Literal["pending", "success", "failed", "abandoned"]
Page = Annotated[int, Query(ge=1)]


def _account(request: Request) -> str:
    """The API key the gateway admitted for this request."""
    return cast(str, request.scope["state"]["account"])


def _date(name: str, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_iso(value)
    except ValueError as exc:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("query", name), "msg": str(exc), "input": value}]
        ) from exc


def _formats(formats: list[Format]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(formats))


def api_router(sim: Simulator) -> APIRouter:
    """Every ``/v1`` route bound to ``sim``."""
    router = APIRouter(prefix="/v1")

    @router.post("/extract")
    async def post_extract(body: ExtractRequest, request: Request) -> JSONResponse:
        mode = body.processing_mode or sim.config.default_processing_mode
        job = sim.submit_extract(
            _account(request), body.url, _formats(body.formats), body.render_js, mode
        )
        if mode == "async":
            return JSONResponse(views.extract_accepted(job), 202)
        work = job.work
        if work.settle_at - work.created_at > sim.config.sync_timeout_s:
            raise ApiError("SYNC_TIMEOUT", "timed out waiting for a browser; try async mode")
        if work.outcome.status == "failed":
            # 422 is also the contract's answer to an extraction that itself failed.
            raise ApiError(
                work.outcome.error_code or "EXTRACTION_FAILED",
                work.outcome.error_message or "extraction failed",
                status=422,
                retryable=work.outcome.retryable,
            )
        return JSONResponse(views.extract_sync(job))

    # Declared before /extract/{job_id} so "jobs" is not taken for a job id.
    @router.get("/extract/jobs")
    async def list_jobs(
        request: Request,
        *,
        job_id: str | None = None,
        url: str | None = None,
        status: JobStatus | None = None,
        output: Format | None = None,
        start_date: str | None = None,
        end_date: str | None = None,
        page: Page = 1,
        page_size: Annotated[int, Query(ge=1, le=100)] = 100,
    ) -> JSONResponse:
        filters = JobFilter(
            job_id,
            url,
            status,
            output,
            _date("start_date", start_date),
            _date("end_date", end_date),
        )
        jobs, total = sim.list_extract(_account(request), filters, page, page_size)
        now = sim.clock.time()
        return JSONResponse(
            {
                sim.config.job_list_field: [views.job_list_item(job, now) for job in jobs],
                "page": page,
                "page_size": page_size,
                "page_count": views.page_count(total, page_size),
                "total": total,
            }
        )

    @router.get("/extract/{job_id}")
    async def get_extract(job_id: str, request: Request) -> JSONResponse:
        job = sim.get_extract(_account(request), job_id)
        return JSONResponse(sim.faults.malformed(views.extract_job(job, sim.clock.time()), job_id))

    @router.post("/batch")
    async def post_batch(body: BatchRequest, request: Request) -> JSONResponse:
        batch = sim.submit_batch(
            _account(request), body.urls, _formats(body.formats), body.render_js
        )
        return JSONResponse(
            {
                "job_id": batch.job_id,
                "status": "queued",
                "status_url": f"/v1/batch/{batch.job_id}",
                "total_urls": len(batch.items),
                "invalid_urls": batch.invalid_urls,
            },
            202,
        )

    @router.get("/batch/{batch_id}")
    async def get_batch(
        batch_id: str,
        request: Request,
        page: Page = 1,
        page_size: Annotated[int, Query(ge=1, le=50)] = 10,
    ) -> JSONResponse:
        batch = sim.get_batch(_account(request), batch_id)
        body = sim.faults.paged(views.batch_page(batch, sim.clock.time(), page, page_size))
        return JSONResponse(sim.faults.malformed(body, batch_id))

    @router.post("/crawl")
    async def post_crawl(body: CrawlRequest, request: Request) -> JSONResponse:
        crawl = sim.submit_crawl(
            _account(request), body.url, body.max_pages, _formats(body.formats), body.render_js
        )
        return JSONResponse(
            {
                "job_id": crawl.job_id,
                "status": "queued",
                "status_url": f"/v1/crawl/{crawl.job_id}",
                "max_pages": body.max_pages or sim.config.crawl_default_max_pages,
            },
            202,
        )

    @router.get("/crawl/{crawl_id}")
    async def get_crawl(
        crawl_id: str,
        request: Request,
        page: Page = 1,
        page_size: Annotated[int, Query(ge=1, le=50)] = 10,
    ) -> JSONResponse:
        crawl = sim.get_crawl(_account(request), crawl_id)
        body = sim.faults.paged(views.crawl_page(crawl, sim.clock.time(), page, page_size))
        return JSONResponse(sim.faults.malformed(body, crawl_id))

    @router.delete("/crawl/{crawl_id}")
    async def delete_crawl(crawl_id: str, request: Request) -> JSONResponse:
        crawl, in_flight = sim.cancel_crawl(_account(request), crawl_id)
        return JSONResponse(
            {
                "job_id": crawl.job_id,
                "status": crawl.status(sim.clock.time()),
                "status_url": f"/v1/crawl/{crawl.job_id}",
                "in_flight_pages": in_flight,
            }
        )

    @router.post("/webhooks")
    async def post_webhook(body: WebhookCreate, request: Request) -> JSONResponse:
        sub = sim.subscriptions.create(
            _account(request), body.url, body.event_type, body.description
        )
        return JSONResponse(views.webhook(sub, with_secret=True), 201)

    @router.get("/webhooks")
    async def list_webhooks(request: Request) -> JSONResponse:
        subs = sim.subscriptions.list_for(_account(request))
        return JSONResponse({"items": [views.webhook(sub) for sub in subs], "total": len(subs)})

    @router.get("/webhooks/{webhook_id}")
    async def get_webhook(webhook_id: str, request: Request) -> JSONResponse:
        return JSONResponse(views.webhook(sim.subscriptions.get(_account(request), webhook_id)))

    @router.api_route("/webhooks/{webhook_id}", methods=["PATCH", "PUT"])
    async def update_webhook(
        webhook_id: str, body: WebhookUpdate, request: Request
    ) -> JSONResponse:
        sub = sim.subscriptions.update(_account(request), webhook_id, body.changes())
        return JSONResponse(views.webhook(sub))

    @router.delete("/webhooks/{webhook_id}", status_code=204)
    async def delete_webhook(webhook_id: str, request: Request) -> Response:
        sim.subscriptions.delete(_account(request), webhook_id)
        return Response(status_code=204)

    @router.post("/webhooks/{webhook_id}/rotate-secret")
    async def rotate_secret(webhook_id: str, request: Request) -> JSONResponse:
        return JSONResponse({"secret": sim.subscriptions.rotate(_account(request), webhook_id)})

    @router.get("/webhooks/{webhook_id}/deliveries")
    async def list_deliveries(
        webhook_id: str,
        request: Request,
        status: DeliveryStatus | None = None,
        page: Page = 1,
        page_size: Annotated[int, Query(ge=1, le=100)] = 20,
    ) -> JSONResponse:
        rows, total = sim.subscriptions.deliveries(
            _account(request), webhook_id, status, page, page_size
        )
        return JSONResponse(
            {
                "items": [views.delivery(row) for row in rows],
                "page": page,
                "page_size": page_size,
                "page_count": views.page_count(total, page_size),
                "total": total,
            }
        )

    return router
