"""Evidence without a stack: the account's webhook delivery log names a batch or crawl once it
settles, failed deliveries too (``evidence.evidenced`` checks each against the entry)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Protocol

from scrape_pipeline.geonode.errors import NotFoundError
from scrape_pipeline.geonode.webhooks import Delivery, Webhook
from scrape_pipeline.jobs import JobKind
from scrape_pipeline.runs.evidence import first_seen


class DeliveryLog(Protocol):
    """The reads of the delivery log this needs (``GeonodeClient`` has them)."""

    def list_webhooks(self) -> list[Webhook]: ...

    def iter_deliveries(
        self, webhook_id: str, *, status: str | None = None, start_page: int = 1
    ) -> Iterator[Delivery]: ...


class DeliveryLogCandidates:
    """Job ids the delivery log of the kind's subscriptions (active or not) names since
    ``since``: one ``GET /v1/webhooks``, then each log's pages newest first down to ``since``.
    No subscription (or a 404) is no evidence; any other failure is raised (still in doubt)."""

    def __init__(self, log: DeliveryLog) -> None:
        self.log = log

    def candidates(self, kind: JobKind, since: float) -> Iterator[str]:
        event = f"{kind}_completed"  # the API's names (``receiver.payload.EVENT_KINDS``)
        try:
            hooks = [h for h in self.log.list_webhooks() if h.event_type == event]
        except NotFoundError:
            return
        yield from first_seen(
            chain.from_iterable(self._named(hook.id, event, since) for hook in hooks)
        )

    def _named(self, webhook_id: str, event: str, since: float) -> Iterator[str]:
        """The job ids of one subscription's attempts since ``since``, newest first."""
        try:
            for delivery in self.log.iter_deliveries(webhook_id):
                # An attempt listed without its time counts as inside the range.
                created = delivery.created_at
                if created is not None and created.timestamp() < since:
                    return  # every attempt after it is older still
                if delivery.event_type == event and delivery.job_id:
                    yield delivery.job_id
        except NotFoundError:
            return  # deleted while being read: what it named before is kept
