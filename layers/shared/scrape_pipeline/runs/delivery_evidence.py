"""Evidence without a stack: the jobs the account's webhook delivery log names.

The API logs every delivery attempt of a subscription, failed ones too (a receiver that is
down, or none listening at all), with its ``event_type`` and ``job_id``: a batch or crawl a
lost POST created is named there once it settles, whether or not anyone received its
webhook. ``DeliveryLogCandidates`` reads the subscriptions of the kind's event
(``batch_completed``, ``crawl_completed``) and yields the job ids of their attempts since
``since``; ``evidence.evidenced`` checks each against the entry in doubt.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Final, Protocol

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.geonode.errors import NotFoundError
from scrape_pipeline.geonode.webhooks import Delivery, Webhook
from scrape_pipeline.jobs import JobKind
from scrape_pipeline.payload import EVENT_KINDS
from scrape_pipeline.runs.evidence import CandidateSource, first_seen

EVENT_OF_KIND: Final[Mapping[JobKind, str]] = {kind: event for event, kind in EVENT_KINDS.items()}


class DeliveryLog(Protocol):
    """The reads of the delivery log this needs (``GeonodeClient`` has them)."""

    def list_webhooks(self) -> list[Webhook]: ...

    def iter_deliveries(
        self, webhook_id: str, *, status: str | None = None, start_page: int = 1
    ) -> Iterator[Delivery]: ...


class DeliveryLogCandidates:
    """Job ids the delivery log of the kind's subscriptions names since ``since``.

    Cost per call: one ``GET /v1/webhooks``, then, per subscription of the kind's event
    (active or not: a disabled one's log still holds what it sent), the pages of 100 attempts
    down to the first attempt older than ``since``: ceil(attempts since ``since`` / 100)
    pages, at least one. The log is read newest first, as the API serves it (the delivery-log
    sweep relies on the same order); a receiver that fails adds one attempt per retry
    (up to 8 per job). No subscription of the event (or an API whose webhooks are not live:
    404) is no evidence, not an error; any other failure is raised (still in doubt).
    """

    def __init__(self, log: DeliveryLog) -> None:
        self.log = log

    def candidates(self, kind: JobKind, since: float) -> Iterator[str]:
        event = EVENT_OF_KIND.get(kind)
        if event is None:
            return
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


class AnyOf:
    """The candidates of several sources, each id once, in the sources' order.

    A source that fails gives nothing and the others still count; only when every source
    failed is the first failure raised (the entries stay in doubt).
    """

    def __init__(self, *sources: CandidateSource) -> None:
        self.sources: Sequence[CandidateSource] = sources

    def candidates(self, kind: JobKind, since: float) -> Iterable[str]:
        named: list[str] = []
        failures: list[PipelineError] = []
        for source in self.sources:
            try:
                named += source.candidates(kind, since)
            except PipelineError as exc:
                failures.append(exc)
        if failures and len(failures) == len(self.sources):
            raise failures[0]
        return list(dict.fromkeys(named))


__all__: Sequence[str] = ("EVENT_OF_KIND", "AnyOf", "DeliveryLog", "DeliveryLogCandidates")
