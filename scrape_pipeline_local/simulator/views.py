"""The JSON shapes the API answers with, built from records and the current clock time."""

from __future__ import annotations

import math
from typing import Any

from scrape_pipeline_local.simulator import content
from scrape_pipeline_local.simulator.state import TERMINAL, Batch, Crawl, ExtractJob, Work, counters
from scrape_pipeline_local.simulator.subscriptions import Attempt, Event, Subscription
from scrape_pipeline_local.simulator.timefmt import iso, iso_or_none

Json = dict[str, Any]  # JSON-ready; Any so callers can index truth rows freely


def page_count(total: int, page_size: int) -> int:
    """Pages needed for ``total`` rows; an empty listing still has one (empty) page."""
    return max(1, math.ceil(total / page_size))


def _error(work: Work) -> Json:
    return {
        "code": work.outcome.error_code,
        "message": work.outcome.error_message,
        "retryable": work.outcome.retryable,
        "details": {},
    }


def extract_job(job: ExtractJob, now: float) -> Json:
    """``GET /v1/extract/{job_id}``: data only when completed, error only when failed."""
    work = job.work
    status = work.status(now)
    settled = status in TERMINAL
    return {
        "job_id": job.job_id,
        "status": status,
        "created_at": iso(work.created_at),
        "completed_at": iso(work.settle_at) if settled else None,
        "data": content.extract(work.url, work.formats, work.content_bytes)
        if status == "completed"
        else None,
        "metadata": {
            "url": work.url,
            "render_js": work.render_js,
            "http_status": work.outcome.http_status if settled else None,
            "duration_ms": work.duration_ms() if settled else None,
            "retry_count": work.outcome.retry_count if settled else 0,
            "formats": list(work.formats),
            "processing_mode": job.processing_mode,
            "started_at": iso(work.started_at) if now >= work.started_at else None,
        },
        "error": _error(work) if status == "failed" else None,
        "tokens_charged": work.tokens_charged(now),
    }


def extract_accepted(job: ExtractJob) -> Json:
    """The 202 answer to an async ``POST /v1/extract``."""
    return {
        "job_id": job.job_id,
        "status": "queued",
        "status_url": f"/v1/extract/{job.job_id}",
        "estimated_tokens": job.work.tokens,
    }


def extract_sync(job: ExtractJob) -> Json:
    """The 200 answer to a sync ``POST /v1/extract`` that completed."""
    work = job.work
    return {
        "data": content.extract(work.url, work.formats, work.content_bytes),
        "metadata": {
            "url": work.url,
            "http_status": work.outcome.http_status,
            "processing_mode": "sync",
            "duration_ms": work.duration_ms(),
        },
        "tokens_charged": work.tokens,
    }


def job_list_item(job: ExtractJob, now: float) -> Json:
    """A row of ``GET /v1/extract/jobs``; execution_time in seconds once settled."""
    work = job.work
    status = work.status(now)
    return {
        "job_id": job.job_id,
        "status": status,
        "url": work.url,
        "created_at": iso(work.created_at),
        "execution_time": (
            round(work.settle_at - work.created_at, 3) if status in TERMINAL else None
        ),
        "output": ",".join(work.formats),
    }


def work_item(index: int, work: Work, now: float) -> Json:
    """An item of a batch or a page of a crawl."""
    status = work.status(now)
    settled = status in TERMINAL
    return {
        "input_index": index,
        "url": work.url,
        "status": status,
        "error_code": work.outcome.error_code if status == "failed" else None,
        "error_message": work.outcome.error_message if status == "failed" else None,
        "data": content.extract(work.url, work.formats, work.content_bytes)
        if status == "completed"
        else None,
        "metadata": {
            "http_status": work.outcome.http_status if settled else None,
            "duration_ms": work.duration_ms() if settled else None,
            "retry_count": work.outcome.retry_count if settled else 0,
            "tokens_charged": work.tokens_charged(now),
        },
    }


def _tokens(works: list[Work], now: float) -> Json:
    charged = sum(work.tokens_charged(now) for work in works)
    reserved = sum(work.tokens for work in works if work.status(now) not in TERMINAL)
    return {"tokens_charged_total": charged, "tokens_reserved": reserved}


def batch_summary(batch: Batch, now: float) -> Json:
    """A batch's status and counters: the webhook ``data`` and the head of ``GET /v1/batch``."""
    works = [work for _, work in batch.items]
    counts = counters(works, now)
    status = batch.status(now)
    return {
        "job_id": batch.job_id,
        "status": status,
        "created_at": iso(batch.created_at),
        # A cancelled batch, like a crawl, is done once its in-flight items have drained.
        "completed_at": iso(batch.settle_at) if now >= batch.settle_at else None,
        "total_urls": len(works),
        "completed_urls": counts["completed"],
        "failed_urls": counts["failed"],
        "pending_urls": counts["pending"],
        "cancelled_urls": counts["cancelled"],
        "invalid_urls": batch.invalid_urls,
    }


def batch_page(batch: Batch, now: float, page: int, page_size: int) -> Json:
    """``GET /v1/batch/{id}``: counters, token summary and one page of items."""
    start = (page - 1) * page_size
    rows = batch.items[start : start + page_size]
    return {
        **batch_summary(batch, now),
        "token_summary": _tokens([work for _, work in batch.items], now),
        "items": [work_item(index, work, now) for index, work in rows],
        "page": page,
        "page_size": page_size,
        "page_count": page_count(len(batch.items), page_size),
    }


def crawl_summary(crawl: Crawl, now: float) -> Json:
    """A crawl's status and counters: the webhook ``data`` and the head of ``GET /v1/crawl``."""
    counts = counters(crawl.pages, now)
    status = crawl.status(now)
    return {
        "job_id": crawl.job_id,
        "status": status,
        "url": crawl.url,
        "created_at": iso(crawl.created_at),
        # A cancelled crawl is done once its in-flight pages have drained.
        "completed_at": iso(crawl.settle_at) if now >= crawl.settle_at else None,
        "total_pages": len(crawl.pages),
        "completed_pages": counts["completed"],
        "failed_pages": counts["failed"],
        "pending_pages": counts["pending"],
        "cancelled_pages": counts["cancelled"],
    }


def crawl_page(crawl: Crawl, now: float, page: int, page_size: int) -> Json:
    """``GET /v1/crawl/{id}``: the batch's paged shape, pages in discovery order."""
    start = (page - 1) * page_size
    rows = crawl.pages[start : start + page_size]
    return {
        **crawl_summary(crawl, now),
        "token_summary": _tokens(crawl.pages, now),
        "items": [work_item(start + offset, work, now) for offset, work in enumerate(rows)],
        "page": page,
        "page_size": page_size,
        "page_count": page_count(len(crawl.pages), page_size),
    }


def webhook(sub: Subscription, *, with_secret: bool = False) -> Json:
    """A subscription; the secret only on creation (and rotate-secret answers it alone)."""
    body: Json = {
        "id": sub.id,
        "url": sub.url,
        "description": sub.description,
        "is_active": sub.is_active,
        "event_type": sub.event_type,
        "created_at": iso(sub.created_at),
        "updated_at": iso(sub.updated_at),
    }
    if with_secret:
        body["secret"] = sub.secret
    return body


def delivery(attempt: Attempt) -> Json:
    """A row of ``GET /v1/webhooks/{id}/deliveries``; created_at is when the attempt began."""
    return {
        "id": attempt.delivery_id,
        "event_type": attempt.event.event_type,
        "job_id": attempt.event.job_id,
        "attempt_number": attempt.attempt_number,
        "status": attempt.status,
        "http_status": attempt.http_status,
        "delivered_at": iso_or_none(attempt.delivered_at),
        "created_at": iso(attempt.sent_at),
    }


def truth_attempt(attempt: Attempt) -> Json:
    """Everything about one attempt, for truth queries (times as epoch seconds)."""
    event = attempt.event
    return {
        "delivery_id": attempt.delivery_id,
        "event_id": event.id,
        "subscription_id": event.subscription_id,
        "account": event.account,
        "event_type": event.event_type,
        "job_id": event.job_id,
        "attempt_number": attempt.attempt_number,
        "duplicate": attempt.duplicate,
        "status": attempt.status,
        "http_status": attempt.http_status,
        "error": attempt.error,
        "url": attempt.url,
        "sent_at": attempt.sent_at,
        "delivered_at": attempt.delivered_at,
        "dispatch_seq": attempt.dispatch_seq,
        "body_bytes": attempt.body_bytes,
        "secret_rotation": attempt.secret_rotation,
    }


def truth_event(event: Event) -> Json:
    """One event owed to one subscription, dropped or not."""
    return {
        "event_id": event.id,
        "event_type": event.event_type,
        "account": event.account,
        "job_id": event.job_id,
        "subscription_id": event.subscription_id,
        "created_at": event.created_at,
        "dropped": event.dropped,
        "duplicated": event.duplicated,
    }
