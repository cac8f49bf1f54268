"""The API's endpoints that only operators and the local stack call (sync extracts, a crawl's
cancellation, webhook management): no Lambda runs them, so the layer does not ship them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline.geonode.client import MARKDOWN, Formats, GeonodeClient, job_body, segment
from scrape_pipeline.geonode.fields import as_dict, as_int
from scrape_pipeline.geonode.models import ApiStatus, BatchItem, read_status
from scrape_pipeline.geonode.transport import query
from scrape_pipeline.geonode.webhooks import Webhook


@dataclass(frozen=True)
class ExtractResult:
    """The 200 answer of a synchronous extract."""

    data: dict[str, Any]
    metadata: dict[str, Any]
    tokens_charged: int | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> ExtractResult:
        """Read the 200 answer of ``POST /v1/extract`` in sync mode."""
        return cls(
            data=as_dict(body.get("data")),
            metadata=as_dict(body.get("metadata")),
            tokens_charged=body.get("tokens_charged"),
            raw=dict(body),
        )


@dataclass(frozen=True)
class CrawlCancel:
    """The answer to ``DELETE /v1/crawl/{id}``."""

    job_id: str
    status: ApiStatus | str
    in_flight_pages: int
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> CrawlCancel:
        """Read the answer to a crawl's cancellation."""
        return cls(
            job_id=str(body.get("job_id", "")),
            status=read_status(body.get("status", "")),
            in_flight_pages=as_int(body.get("in_flight_pages")),
            raw=dict(body),
        )


class AdminClient(GeonodeClient):
    """``GeonodeClient`` with the endpoints the pipeline itself never calls."""

    def extract_sync(
        self, url: str, *, formats: Formats = MARKDOWN, render_js: bool = False, **options: Any
    ) -> ExtractResult:
        """Scrape ``url`` and wait for the result (``processing_mode: sync``)."""
        body = job_body(url, formats, render_js, options, processing_mode="sync")
        return ExtractResult.from_api(self._post("/v1/extract", body))

    def iter_crawl_items(self, crawl_id: str) -> Iterator[BatchItem]:
        """Every page of a crawl, page by page."""
        return self._items("crawl", crawl_id)

    def cancel_crawl(self, crawl_id: str) -> CrawlCancel:
        """Stop scheduling new pages; in-flight pages drain. 409 when already finished."""
        body = self._json(self._send("DELETE", f"/v1/crawl/{segment(crawl_id)}"))
        return CrawlCancel.from_api(body)

    def create_webhook(
        self, url: str, event_type: str, *, description: str | None = None
    ) -> Webhook:
        """Subscribe ``url`` to one event type; the answer's ``secret`` is shown only now."""
        body = query(url=url, event_type=event_type, description=description)
        return Webhook.from_api(self._post("/v1/webhooks", body))

    def get_webhook(self, webhook_id: str) -> Webhook:
        """One subscription."""
        return Webhook.from_api(self._get(f"/v1/webhooks/{segment(webhook_id)}"))

    def update_webhook(
        self,
        webhook_id: str,
        *,
        is_active: bool | None = None,
        url: str | None = None,
        description: str | None = None,
    ) -> Webhook:
        """Change a subscription; ``is_active=False`` disables it."""
        body = query(is_active=is_active, url=url, description=description)
        response = self._send("PATCH", f"/v1/webhooks/{segment(webhook_id)}", json=body)
        return Webhook.from_api(self._json(response))

    def delete_webhook(self, webhook_id: str) -> None:
        """Remove a subscription."""
        self._send("DELETE", f"/v1/webhooks/{segment(webhook_id)}")

    def rotate_webhook_secret(self, webhook_id: str) -> str:
        """A new secret; the previous one stops working at once on the sender's side."""
        body = self._post(f"/v1/webhooks/{segment(webhook_id)}/rotate-secret")
        return str(body["secret"])
