"""Adopting a batch or crawl in doubt from later evidence (ledger rows, the webhook delivery
log), only when the API's answer fits the entry exactly: a wrong adoption leaves URLs unposted."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime
from functools import cache, partial
from typing import Final, Protocol

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.geonode.batches import BatchItem, BatchStatus
from scrape_pipeline.geonode.errors import GeonodeError, NotFoundError
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
    source: CandidateSource,
    reader: JobReader,
    mode: RunMode,
    urls: Sequence[str],
    since: float,
    *,
    taken: Collection[str] = (),
) -> str | None:
    """The id of the ``mode`` job (a batch or crawl: an extract is ``doubt.find_created``'s)
    posted for ``urls`` that ``source`` saw since ``since``."""
    check = _is_batch if mode is RunMode.BATCH else _is_crawl
    for job_id in source.candidates(JobKind(mode.kind), since):
        if job_id in taken:
            continue
        try:
            matched = check(reader, job_id, urls, since)
        except NotFoundError:
            continue  # another account's, or not readable yet: no evidence either way
        if matched:
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
        named = _Named(list(source.candidates(JobKind(run.mode.kind), min(sinces))))
    except PipelineError:
        return  # the source is unreachable: still in doubt, looked up again next time
    remembered = _Remembered(reader)
    held = Held(journal, run)
    for entry, since in zip(doubted, sinces, strict=True):
        find = partial(
            find_by_evidence, named, remembered, run.mode, entry.urls, since, taken=taken
        )
        try:
            job_id = _first_not_held(find, held, taken)
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


def _first_not_held(find: Callable[[], str | None], held: Held, taken: set[str]) -> str | None:
    """The first job ``find`` names that no run's entry holds."""
    job_id = find()
    while job_id is not None and job_id in held:
        taken.add(job_id)  # another run's batch of the same URLs: look further
        job_id = find()
    return job_id


class _Named:
    """Candidates read once."""

    def __init__(self, job_ids: Sequence[str]) -> None:
        self.job_ids = job_ids

    def candidates(self, kind: JobKind, since: float) -> Iterable[str]:
        return self.job_ids


class _Remembered:
    """A reader that asks the API about each batch or crawl once."""

    def __init__(self, reader: JobReader) -> None:
        # Remembered by their arguments: a lookup that raised is asked again.
        self._batch = cache(reader.get_batch)
        self._crawl = cache(reader.get_crawl)
        self._items = cache(lambda batch_id: list(reader.iter_batch_items(batch_id)))

    def get_batch(self, batch_id: str, *, page: int = 1, page_size: int = 10) -> BatchStatus:
        return self._batch(batch_id, page=page, page_size=page_size)

    def get_crawl(self, crawl_id: str, *, page: int = 1, page_size: int = 10) -> BatchStatus:
        return self._crawl(crawl_id, page=page, page_size=page_size)

    def iter_batch_items(self, batch_id: str) -> Iterator[BatchItem]:
        return iter(self._items(batch_id))


def _is_batch(reader: JobReader, job_id: str, urls: Sequence[str], since: float) -> bool:
    head = reader.get_batch(job_id, page_size=_FIRST_PAGE)
    wanted = set(urls)
    total = _head_fits(head, wanted, since)
    if total is None:
        return False
    items = {item.url for item in reader.iter_batch_items(job_id)}
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


def _is_crawl(reader: JobReader, job_id: str, urls: Sequence[str], since: float) -> bool:
    head = reader.get_crawl(job_id, page_size=1)
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
