"""Adopting a batch or crawl in doubt from later evidence (ledger rows, the webhook delivery
log, which names one once it settles, failed deliveries too), only when the API's answer fits
the entry exactly: a wrong adoption leaves URLs unposted."""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Iterator, Sequence
from datetime import datetime
from functools import cache, partial
from itertools import chain
from typing import Final, Protocol

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.geonode.errors import GeonodeError, NotFoundError
from scrape_pipeline.geonode.models import BatchItem, BatchStatus
from scrape_pipeline.geonode.webhooks import Delivery, Webhook
from scrape_pipeline.jobs import JobKind
from scrape_pipeline.runs.doubt import Held
from scrape_pipeline.runs.journal import Entry, Journal
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.plan import Run, RunMode

# A batch's first page, with its counters: most wrong candidates are told apart by it.
_FIRST_PAGE: Final = 50


class CandidateSource(Protocol):
    """Job ids of one kind that something besides the run journal knows of."""

    def candidates(self, kind: JobKind, since: float) -> Iterable[str]:
        """Ids of ``kind`` jobs first seen at or after ``since`` (epoch seconds), each once."""
        ...


class JobReader(Protocol):
    """The reads of a batch or crawl the check needs (``GeonodeClient`` has them)."""

    def get_batch(self, batch_id: str, *, page: int = 1, page_size: int = 10) -> BatchStatus: ...

    def iter_batch_items(self, batch_id: str) -> Iterator[BatchItem]: ...

    def get_crawl(self, crawl_id: str, *, page: int = 1, page_size: int = 10) -> BatchStatus: ...


def find_by_evidence(
    named: Iterable[str],
    reads: Reads,
    mode: RunMode,
    urls: Sequence[str],
    since: float,
    *,
    taken: Collection[str] = (),
    held: Container[str] = (),
) -> str | None:
    """The first of ``named`` not ``taken`` that is the ``mode`` job (a batch or crawl: an
    extract is ``doubt.find_created``'s) posted for ``urls`` since ``since``, held by no run."""
    check = _is_batch if mode is RunMode.BATCH else _is_crawl
    for job_id in named:
        if job_id in taken:
            continue
        try:
            matched = check(reads, job_id, urls, since)
        except NotFoundError:
            continue  # another account's, or not readable yet: no evidence either way
        if matched and job_id not in held:  # held: another run's batch of the same URLs
            return job_id
    return None


def evidenced(
    source: CandidateSource | None,
    reader: JobReader,
    journal: Journal,
    run: Run,
    *,
    skew_s: float,
) -> Iterator[tuple[Entry, str]]:
    """Each batch or crawl of ``run`` (not an extract run's) in doubt that ``source`` names,
    with its job's id (a lookup that fails leaves its entry in doubt)."""
    doubted = journal.entries(run.name, [EntryState.IN_DOUBT])
    if source is None or not doubted:
        return
    taken = {e.job_id for e in journal.entries(run.name) if e.job_id}
    sinces = [_since(entry, skew_s) for entry in doubted]
    # One read of the source, and one of each candidate, serve every entry in doubt.
    try:
        named = list(source.candidates(JobKind(run.mode.kind), min(sinces)))
    except PipelineError:
        return  # the source is unreachable: still in doubt, looked up again next time
    reads, held = Reads(reader), Held(journal, run)
    for entry, since in zip(doubted, sinces, strict=True):
        try:
            job_id = find_by_evidence(
                named, reads, run.mode, entry.urls, since, taken=taken, held=held
            )
        except GeonodeError:
            continue
        if job_id is not None:
            taken.add(job_id)
            yield entry, job_id


def first_seen(job_ids: Iterable[str]) -> Iterator[str]:
    """``job_ids`` each once, where first named (lazily: a caller may stop at a match)."""
    seen: set[str] = set()
    for job_id in job_ids:
        if job_id not in seen:
            seen.add(job_id)
            yield job_id


def _since(entry: Entry, skew_s: float) -> float:
    """The earliest its job can have been created, on the API's clock."""
    return (entry.posted_at or entry.doubted_at or 0.0) - skew_s


class Reads:
    """A batch's or crawl's reads, each asked of the API once (one that raised, again)."""

    def __init__(self, reader: JobReader) -> None:
        self.batch = cache(partial(reader.get_batch, page_size=_FIRST_PAGE))
        self.crawl = cache(partial(reader.get_crawl, page_size=1))
        self.items = cache(lambda job_id: {item.url for item in reader.iter_batch_items(job_id)})


def _is_batch(reads: Reads, job_id: str, urls: Sequence[str], since: float) -> bool:
    wanted = set(urls)
    total = _head_fits(reads.batch(job_id), wanted, since)
    if total is None:
        return False
    items = reads.items(job_id)
    # Every item one of the entry's URLs, each URL once, the others counted invalid.
    return len(items) == total and items <= wanted


def _head_fits(head: BatchStatus, wanted: set[str], since: float) -> int | None:
    """A batch's URL count when its first page could be the entry's (created since ``since``,
    as many URLs, valid and invalid, its items among them), else None."""
    total, invalid = head.counters.get("total_urls"), head.counters.get("invalid_urls", 0)
    if not _created_since(head, since) or total is None or total + invalid != len(wanted):
        return None
    if not {item.url for item in head.page.items} <= wanted:
        return None
    return total


def _is_crawl(reads: Reads, job_id: str, urls: Sequence[str], since: float) -> bool:
    head = reads.crawl(job_id)
    return _created_since(head, since) and head.raw.get("url") == urls[0]


def _created_since(head: BatchStatus, since: float) -> bool:
    """The job was not created before ``since`` (an answer without ``created_at`` passes)."""
    created = head.raw.get("created_at")
    if not isinstance(created, str):
        return True
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() >= since
    except ValueError:
        return True


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
