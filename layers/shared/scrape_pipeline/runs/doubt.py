"""Finding the extract job a POST in doubt created: the earliest of its URL since the POST that
no one holds and that echoes every option the POST set; never another job of the same URL."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from scrape_pipeline.geonode.errors import NotFoundError
from scrape_pipeline.geonode.models import Job, JobSummary
from scrape_pipeline.jobs import DETAIL_RESUBMITTED_AS, JobKey, JobKind

# Only annotations name these: the processor's look-ups (``resubmission``)
# load none of the runs' journal with this module.
if TYPE_CHECKING:
    from scrape_pipeline.ledger.rows import LedgerRow
    from scrape_pipeline.runs.journal import Journal
    from scrape_pipeline.runs.plan import Run

DEFAULT_SKEW_S = 300.0
ASYNC = "async"  # the processing mode of every extract job a caller here posts


class JobLister(Protocol):
    """The reads of the API the lookup needs (``GeonodeClient`` has them)."""

    def iter_jobs(self, **filters: Any) -> Iterator[JobSummary]:
        """Every job matching ``filters``, each once."""
        ...

    def get_job(self, job_id: str) -> Job:
        """The job as ``GET /v1/extract/{job_id}`` answers."""
        ...


@dataclass(frozen=True)
class Posted:
    """What an extract POST set besides its URL: the job adopted for it must echo each."""

    formats: tuple[str, ...] = ("markdown",)
    render_js: bool = False
    extra: tuple[tuple[str, Any], ...] = ()  # any other option, as the POST sent it

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> Posted:
        """From the options a POST sends (a run's, ``plan.post_options``)."""
        rest = {k: v for k, v in options.items() if k not in {"formats", "render_js"}}
        return cls(
            tuple(options.get("formats") or ("markdown",)),
            bool(options.get("render_js", False)),
            tuple(sorted(rest.items())),
        )

    def matches(self, job: Job) -> bool:
        """``job``'s answer echoes every option this POST set, and it is an async job."""
        said = {**job.raw, **job.metadata}
        formats = said.get("formats")
        if not isinstance(formats, list) or set(formats) != set(self.formats):
            return False
        if said.get("render_js") is not self.render_js:
            return False
        if said.get("processing_mode") != ASYNC:
            return False
        return all((key, value) in said.items() for key, value in self.extra)


class Claims(Protocol):
    """What a lookup must respect: the options the POST set, and the jobs someone holds."""

    posted: Posted

    def __contains__(self, job_id: object) -> bool:
        """``job_id`` is someone's: never adopted."""
        ...


def find_created(
    client: JobLister,
    url: str,
    posted_at: float,
    *,
    claims: Claims,
    skew_s: float = DEFAULT_SKEW_S,
) -> JobSummary | None:
    """The job a POST of ``url`` sent at ``posted_at`` created, if the API lists one that
    echoes the POST's options and that no one ``claims``."""
    since = posted_at - skew_s

    def created(job: JobSummary) -> float:  # a job listed without its time: in the range
        return job.created_at.timestamp() if job.created_at else since

    listed = [
        job
        for job in client.iter_jobs(url=url, start_date=since)
        if job.url in (url, None) and created(job) >= since
    ]
    listed.sort(key=created)
    for job in listed:
        if job.job_id in claims:
            continue  # never two owners of one job
        try:
            answer = client.get_job(job.job_id)
        except NotFoundError:
            continue  # not readable yet: no evidence of its options
        if claims.posted.matches(answer):
            return job
    return None


class Held:
    """The job ids any run holds (``Journal.holder``), and those ``add``ed since."""

    def __init__(self, journal: Journal, run: Run) -> None:
        self._journal, self._run = journal, run
        self._added: set[str] = set()
        self.posted = Posted.of(run.options)

    def add(self, job_id: str) -> None:
        """``job_id`` was adopted since the read."""
        self._added.add(job_id)

    def __contains__(self, job_id: object) -> bool:
        if not isinstance(job_id, str):
            return False
        kind = self._run.mode.kind
        return job_id in self._added or self._journal.holder(kind, job_id) is not None


class RowReader(Protocol):
    """The ledger's read the processor's lookups need (``Ledger.get_many``)."""

    def get_many(self, keys: Sequence[JobKey]) -> Mapping[JobKey, LedgerRow]: ...


class LedgerClaims:
    """Extract jobs the ledger says are someone else's, for the processor's lookups: ``own``,
    a row naming a run, or retrying another item than ``item`` (or than ``like``'s row
    retries); never the job ``like``'s row notes as its resubmission (handed on to us)."""

    def __init__(
        self,
        rows: RowReader,
        posted: Posted,
        *,
        own: Collection[str] = (),
        item: str | None = None,
        like: str | None = None,
    ) -> None:
        self._rows, self.posted, self._own = rows, posted, own
        self._item, self._like = item, like
        self._noted: str | None = None

    def __contains__(self, job_id: object) -> bool:
        if not isinstance(job_id, str) or job_id in self._own:
            return True
        row = self._read(JobKey(JobKind.EXTRACT, job_id))
        if row is None or job_id == self._noted:
            return False  # unknown to the ledger: a lost POST's job, as its webhook may be late
        return row.run is not None or (row.retry_of is not None and row.retry_of != self._item)

    def _read(self, key: JobKey) -> LedgerRow | None:
        """``key``'s row; the first read also reads ``like``'s, for what its holder noted."""
        if self._like is None:
            return self._rows.get_many([key]).get(key)
        like_key = JobKey(JobKind.EXTRACT, self._like)
        rows = self._rows.get_many([key, like_key])
        like = rows.get(like_key)
        # The job a holder of ``like`` noted before it died: ours (``resubmission.hand_on``).
        self._item, self._noted = (
            (like.retry_of, like.detail.get(DETAIL_RESUBMITTED_AS)) if like else (None, None)
        )
        self._like = None
        return rows.get(key)
