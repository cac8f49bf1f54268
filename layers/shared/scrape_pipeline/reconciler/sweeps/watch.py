"""The watch sweep: WATCHING rows woken once their job settles. Batches, crawls and sick jobs are
polled by age; extract jobs missing from one (resumable) listing of the unsettled ones settled."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scrape_pipeline.config.settings import number
from scrape_pipeline.geonode.client import JOBS_PAGE_MAX
from scrape_pipeline.geonode.models import JobSummary, Page
from scrape_pipeline.jobs import JobState, Source
from scrape_pipeline.ledger.decide import decide
from scrape_pipeline.ledger.evidence import Evidence, Policy, Seen, Why
from scrape_pipeline.ledger.rows import LedgerRow
from scrape_pipeline.reconciler.sweeps import DEFAULT_MAX_PAGES, Budget, Sweep, SweepResult
from scrape_pipeline.reconciler.sweeps.watch_listing import (
    LISTED_CHECKPOINT,
    MAX_LISTED,
    WATCH_CHECKPOINT,
    Listed,
    Listing,
    chunk_name,
    digest,
    pack,
    unpack,
)

ROWS_PER_PAGE = 100
# What the rows pass shows ``decide`` of a parked row: whether its poll is due by age (``_due``).
_POLL_SEEN = {True: Seen.POLL_DUE, False: Seen.POLL_NOT_DUE}
# No staleness bound: the watch schedule (``_due``) says what is due.
_POLICY = Policy()


@dataclass(frozen=True)
class WatchSettings:
    """How watched rows are read and batches and crawls polled."""

    poll_seconds: float = number(
        "WATCH_POLL_SECONDS",
        3600.0,
        "a watched batch or crawl (the API lists neither) is polled at least this often until it "
        "settles: first when it is threshold old, then whenever it has been parked for half its "
        "age (90 s, 2, 4, 8 minutes... then hourly: a dozen GETs for a day-long crawl). Batches "
        "and crawls are recorded WATCHING at submission, so one whose webhook is lost is found "
        "minutes after it settles, however many unsettled jobs the account has. Watched extract "
        "jobs cost nothing each: one listing of the account's unsettled jobs (a page per 100, "
        "resumed across runs on a busy account) covers them all",
    ).field()
    # and first polled at this age: the reconciler gives RECONCILE_THRESHOLD_SECONDS (the job
    # list's twin); 90 s is only for a Watcher built alone (tests)
    first_poll_seconds: float = 90.0
    max_pages: int = DEFAULT_MAX_PAGES  # ledger pages and API pages per run, each
    listing_lag_seconds: float = 30.0  # a job parked this long before a listing is in it
    max_listed: int = MAX_LISTED  # ids a listing keeps at most (smaller only in tests)

    def poll_due_at(self, row: LedgerRow) -> float:
        """When a parked row's poll by age falls due: once parked for half its age (polls at ages
        1, 2, 4, 8... x first_poll, then capped); a sick job's age counts from its failing run."""
        age = row.state_since - (row.failing_since or row.job_created_at or row.created_at)
        return row.state_since + min(self.poll_seconds, max(self.first_poll_seconds, age))


class Watcher(Sweep[WatchSettings]):
    """The reconciler's watch sweep."""

    name = Source.WATCH

    def work(self, budget: Budget, result: SweepResult) -> None:
        """The rows (due polls woken), then the listing, then the extract rows judged."""
        saved = self._books.read(WATCH_CHECKPOINT) or {}
        listing = Listing.read(saved)
        # Extract rows seen by the rows pass under way, or by the last finished one.
        extracts_before = saved.get("extracts") == "1" or listing is not None
        share = budget.share([1.0, 1.0]) if extracts_before else budget
        extract_rows, fields = self._read_rows(saved, share, result)
        written, under_way = dict(saved), listing

        def save(current: Listing | None) -> None:
            """Save the rows' resume point and ``current``'s (the last saved, if a page fails)."""
            nonlocal written, under_way
            under_way = current
            now_fields = {**fields, **(current.fields() if current is not None else {})}
            if now_fields != written:  # a run with nothing to carry over writes nothing
                self._books.write(WATCH_CHECKPOINT, now_fields)
                written = now_fields

        try:
            if extracts_before or extract_rows:
                # A listing that failed judges nothing: only one finished shows a job settled.
                under_way, listed = self._list(listing, budget, result, save)
                self._judge(extract_rows, listed, result)
        finally:
            save(under_way)

    def _read_rows(
        self, saved: Mapping[str, str], budget: Budget, result: SweepResult
    ) -> tuple[list[LedgerRow], dict[str, str]]:
        """The rows pass, due polls woken: the extract rows read, and the fields to save."""
        now = self._clock.time()
        after = float(saved["after"]) if saved.get("after") else None
        seen_extract = saved.get("extracts_seen") == "1"
        extract_rows: list[LedgerRow] = []
        cursor = None

        def fields(finished: bool) -> dict[str, str]:
            saw = seen_extract or bool(extract_rows)
            if finished:
                return {"extracts": "1"} if saw else {}
            out = {"after": "" if after is None else f"{after:.3f}"}
            if saved.get("extracts"):
                out["extracts"] = saved["extracts"]
            if saw:
                out["extracts_seen"] = "1"
            return out

        for _ in range(self.settings.max_pages):
            if budget.spent():
                break
            rows, cursor = self._ledger.pending(
                JobState.WATCHING,
                since_before=now + 1,
                since_after=after if cursor is None else None,
                limit=ROWS_PER_PAGE,
                cursor=cursor,
            )
            result.row_pages += 1
            extract_rows += self._poll(rows, now, result)
            if cursor is None or not rows:
                return extract_rows, fields(finished=True)
            # Within a run the query's own cursor goes on; across runs the next one starts at
            # this state_since, inclusive: a row sharing it is read again, never skipped.
            after = rows[-1].state_since
        result.complete = False
        return extract_rows, fields(finished=False)

    def _poll(self, rows: list[LedgerRow], now: float, result: SweepResult) -> list[LedgerRow]:
        """Wake the rows due a poll by age; returns the healthy extract rows, the listing's
        to judge (a sick job is polled on its schedule whatever the listing says)."""
        by_listing: list[LedgerRow] = []
        due: list[LedgerRow] = []
        for row in rows:
            evidence = Evidence(_POLL_SEEN[self._due(row, now)], Source.WATCH)
            decision = decide(row, evidence, now, _POLICY)
            if decision.why is Why.BY_LISTING:
                by_listing.append(row)
            elif decision.move is not None:
                due.append(row)
        self._wake(due, result)
        return by_listing

    def _wake(self, rows: list[LedgerRow], result: SweepResult) -> None:
        """Wake ``rows`` (each job once), counted in ``result``."""
        due = {row.key: row for row in rows}
        result.recovered += self._recoverer.ensure_many(list(due), due, source=Source.WATCH)

    def _due(self, row: LedgerRow, now: float) -> bool:
        """A poll by age is due (``WatchSettings.poll_due_at``)."""
        return now >= self.settings.poll_due_at(row)

    def _judge(self, rows: list[LedgerRow], listed: Listed | None, result: SweepResult) -> None:
        """Wake the extract rows that ``listed`` shows settled (or, oversize, due by age)."""
        if listed is None:
            return
        now = self._clock.time()
        self._wake([row for row in rows if self._settled(row, listed, now)], result)

    def _settled(self, row: LedgerRow, listed: Listed, now: float) -> bool:
        """``listed`` shows ``row``'s job settled (given up, oversize: polled by age)."""
        if listed.oversize:
            return self._due(row, now)
        return listed.missing(row, self.settings.listing_lag_seconds)

    def _list(
        self,
        listing: Listing | None,
        budget: Budget,
        result: SweepResult,
        save: Callable[[Listing], None],
    ) -> tuple[Listing | None, Listed | None]:
        """Go on with the listing while ``budget`` lasts, saved after every page: the listing
        still under way, and the newest complete one."""
        now = self._clock.time()
        if listing is None:
            listed = Listed.read(self._books.read(LISTED_CHECKPOINT))
            if listed is not None and listed.given_up(now, self.settings.poll_seconds):
                return None, listed  # polled by age until WATCH_POLL passed
            listing = Listing(started=now)
        pages = budget.capped(self.settings.max_pages)
        while not pages.spent(result.watch_list_pages):
            page = self._client.list_jobs(
                status=listing.api_status,
                end_date=listing.end_date,
                page=listing.page,
                page_size=JOBS_PAGE_MAX,
            )
            result.list_pages += 1
            result.watch_list_pages += 1
            finished = self._take(listing, page, result, now)
            if finished is not None:
                return None, finished
            save(listing)
        result.complete = False
        return listing, Listed.read(self._books.read(LISTED_CHECKPOINT))

    def _take(
        self, listing: Listing, page: Page[JobSummary], result: SweepResult, now: float
    ) -> Listed | None:
        """Add ``page``: the listing it completes (or gives up, oversize), else None."""
        ids = {digest(job.job_id) for job in page.items}
        listing.ids |= ids
        if listing.count + len(ids) > self.settings.max_listed:
            listed = Listed(now, frozenset(), oversize=True)
            self._books.write(LISTED_CHECKPOINT, listed.fields())
            return listed
        if listing.completed_by(page):
            return self._complete(listing, result)
        if ids:  # saved before the listing moves past them: a failed write moves nothing
            self._books.write(chunk_name(listing.chunks), {"ids": pack(ids)})
            listing.chunks, listing.count = listing.chunks + 1, listing.count + len(ids)
        listing.past(page)
        return None

    def _complete(self, listing: Listing, result: SweepResult) -> Listed:
        """The finished ``listing``, with the ids earlier runs saved (then kept till the next)."""
        result.watch_listings += 1
        ids = set(listing.ids)
        if listing.read_this_run:
            return Listed(listing.started, frozenset(ids))  # read within this run: used at once
        names = [chunk_name(n) for n in range(listing.chunks_before)]
        for fields in self._books.read_many(names).values():
            ids |= unpack(fields.get("ids", ""))
        listed = Listed(listing.started, frozenset(ids))
        self._books.write(LISTED_CHECKPOINT, listed.fields())
        return listed
