"""The submitter: plans a run, settles what a crash left (unannounced, in doubt, leases run
out), posts every planned entry and records each answer; time and waits are the clock's."""

from __future__ import annotations

import contextlib
import math
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from scrape_pipeline.clock import Clock
from scrape_pipeline.geonode.errors import GeonodeError, RateLimitedError
from scrape_pipeline.geonode.models import JobSummary, SubmittedJob
from scrape_pipeline.geonode.retry import may_retry
from scrape_pipeline.geonode.settings import LISTING_LAG_FLOOR
from scrape_pipeline.runs.doubt import DEFAULT_SKEW_S, Held, JobLister, find_created
from scrape_pipeline.runs.evidence import CandidateSource, JobReader, evidenced
from scrape_pipeline.runs.journal import Entry, Journal, MoveRefusedError
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.outcomes import Outcome, Verdict, classify
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import Run, RunMode, RunSpec
from scrape_pipeline.runs.report import Event, EventKind, Planned, RunReport
from scrape_pipeline.runs.workers import PostingPool, _OutOfTimeError, holder_gone, new_owner

S = EntryState
LOOKUP_TRIES = 6  # a lookup's tries with a pace (the client's own policy for reads)
_INTERRUPTED = "interrupted mid-POST (Ctrl-C): the answer may be lost"


class SubmitClient(JobLister, JobReader, Protocol):
    """The API calls a run makes (``GeonodeClient`` has them all)."""

    def submit_extract(self, url: str, **options: Any) -> SubmittedJob: ...

    def create_batch(self, urls: Iterable[str], **options: Any) -> SubmittedJob: ...

    def create_crawl(self, url: str, **options: Any) -> SubmittedJob: ...


@dataclass(frozen=True)
class SubmitterSettings:
    """The submitter's timings; every one has a default the contract leaves open."""

    skew_s: float = DEFAULT_SKEW_S  # how far the API's clock may run behind ours
    listing_delay_s: float = LISTING_LAG_FLOOR.default  # the list's lag (``listing_lag``)
    max_not_acted: int = 30  # consecutive 429s / unreachable before the run stops
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    wait_for_leases: bool = True  # wait out another submitter's posting lease, then settle it
    wait_for_doubts: bool = True  # else a doubt the list may not cover yet is left for later


class Submitter:
    """Posts runs through ``journal`` with ``client``; ``announce(kind, job_id)`` tells the
    ledger of each batch or crawl once its id is recorded; ``pace``: several workers."""

    def __init__(
        self,
        journal: Journal,
        client: SubmitClient,
        *,
        clock: Clock,
        sleep: Callable[[float], None] | None = None,
        settings: SubmitterSettings | None = None,
        owner: str | None = None,
        announce: Callable[[str, str], None] | None = None,
        listener: Callable[[Event], None] | None = None,
        rng: random.Random | None = None,
        evidence: CandidateSource | None = None,
        pace: Pace | None = None,
    ) -> None:
        self.journal = journal
        self.client = client
        self.clock = clock
        self.sleep = sleep or clock.sleep
        self.settings = settings or SubmitterSettings()
        self.owner = owner or new_owner()
        self._announce = announce
        self._listener = listener or (lambda event: None)
        self._rng = rng or random.Random()  # backoff jitter only
        self._evidence = evidence  # names batches and crawls no API lists (evidence.py)
        self.pace = pace
        self._lock = threading.RLock()  # the counters below, shared by the workers
        self._in_flight: dict[int, Entry] = {}  # claimed by this submitter, answer not recorded
        self.throttled = 0  # POSTs answered "not acted on" (429 and the like)
        self._posts = 0
        self._not_acted = 0
        self._stopped: Outcome | None = None
        self._looked_up: set[int] = set()
        self._post_unfound = True  # an extract the lookup did not find is posted again
        self._time_left: Callable[[], float] = lambda: math.inf

    def submit(self, spec: RunSpec, name: str | None = None) -> RunReport:
        """Plan ``spec`` (as ``name`` or its derived name) and post what is not submitted."""
        return self.work(self.plan(spec, name))

    def plan(self, spec: RunSpec, name: str | None = None) -> Planned:
        """Plan ``spec`` in the journal (a rerun adds nothing) and say what was found there."""
        run, created = self.journal.plan(spec, name or spec.derived_name(), self.clock.time())
        found = {} if created else dict(Counter(e.state for e in self.journal.entries(run.name)))
        return Planned(run, created, found)

    def work(self, planned: Planned, time_left: Callable[[], float] | None = None) -> RunReport:
        """Post every entry of a planned run not settled yet; past ``time_left`` (seconds) no
        entry is claimed nor wait begun, and the rest is left as it was (``cut``)."""
        run = planned.run
        self._begin(time_left)
        try:
            was_cut = self._work(run)
        except _OutOfTimeError:
            was_cut = True
        entries = self.journal.entries(run.name)
        pause = self.pace.paused_until() - self._t() if self.pace is not None else 0.0
        return RunReport(
            run,
            planned.created,
            planned.resumed,
            entries,
            self._posts,
            self._stopped,
            was_cut,
            max(pause, 0.0),
        )

    def _work(self, run: Run) -> bool:
        """``work``'s steps; True when the caller's time ended them."""
        self._announce_left(run, self.journal.entries(run.name, [S.SUBMITTED]))
        # Only doubts already listable now: the rest are looked up after posting, not waited for.
        self._settle_doubts(run, ready_only=True)
        was_cut = self._post_all(run, self.journal.entries(run.name, [S.PLANNED]))
        if self._stopped is None and not was_cut:
            self._wait_for_held(run)
            self._settle_doubts(run)
        return was_cut

    def settle(self, run: Run, *, post_unfound: bool = False) -> list[Entry]:
        """Resolve what is in doubt without posting planned entries (``runs resolve``); an
        extract not found is posted again only with ``post_unfound``. The entries after."""
        self._begin(None, post_unfound=post_unfound)
        self._announce_left(run, self.journal.entries(run.name, [S.SUBMITTED]))
        self._settle_doubts(run)
        return self.journal.entries(run.name)

    def _begin(self, time_left: Callable[[], float] | None, *, post_unfound: bool = True) -> None:
        """A call's counters, afresh."""
        self._posts, self._not_acted, self._stopped = 0, 0, None
        self._looked_up, self._post_unfound = set(), post_unfound
        self._time_left = time_left or (lambda: math.inf)

    def _settle_doubts(self, run: Run, *, ready_only: bool = False) -> None:
        """Expire leases run out; adopt the job found for an entry in doubt, else post an
        extract again. ``ready_only``: skip extracts the list may not show yet, and batches and
        crawls (their evidence is read once, after posting)."""
        self._expire_leases(run)
        if run.mode is RunMode.ASYNC:
            self._look_up_doubts(run, waits=ready_only or not self.settings.wait_for_doubts)
        elif not ready_only:
            self._adopt_evidenced(run)

    def _adopt_evidenced(self, run: Run) -> None:
        """Adopt each batch or crawl in doubt that later evidence names (no API lists them)."""
        found = evidenced(
            self._evidence, self.client, self.journal, run, skew_s=self.settings.skew_s
        )
        for entry, job_id in found:
            with contextlib.suppress(MoveRefusedError):  # another submitter settled it
                self._submitted(run, entry, job_id, None, EventKind.ADOPTED)

    def _look_up_doubts(self, run: Run, *, waits: bool) -> None:
        """Resolve each extract in doubt once a call; ``waits``: skip those the job list may
        not cover yet rather than wait for it."""
        taken = Held(self.journal, run)  # every run's jobs: never adopted by another
        for entry in self.journal.entries(run.name, [S.IN_DOUBT]):
            if entry.index in self._looked_up or self._stopped is not None:
                continue
            posted_at = entry.posted_at if entry.posted_at is not None else self._t()
            if waits and posted_at + self.settings.listing_delay_s > self._t():
                continue
            self._looked_up.add(entry.index)
            self._resolve(run, entry, posted_at, taken)

    def _expire_leases(self, run: Run) -> None:
        """Entries another submitter left posting past its lease, or whose process is gone:
        in doubt, never planned."""
        for entry in self.journal.entries(run.name, [S.POSTING]):
            if entry.owner == self.owner:
                continue
            try:
                if (entry.lease_until or 0.0) <= self._t():
                    self._tell(EventKind.IN_DOUBT, self.journal.expire(entry, self._t()))
                elif entry.owner is not None and holder_gone(entry.owner):
                    moved = self.journal.abandon(entry, entry.owner, self._t())
                    self._tell(EventKind.IN_DOUBT, moved)
            except MoveRefusedError:
                continue  # its submitter answered after all

    def _resolve(self, run: Run, entry: Entry, posted_at: float, taken: Held) -> None:
        if posted_at + self.settings.listing_delay_s > self._t():
            self._tell(EventKind.CATCHING_UP, entry)  # a look-up before proves nothing
        self._wait_until(posted_at + self.settings.listing_delay_s)
        try:
            job = self._look_up(entry.urls[0], posted_at, taken)
        except GeonodeError:
            return  # the lookup failed: still in doubt, looked up again next time
        if job is not None:
            taken.add(job.job_id)
            self._submitted(run, entry, job.job_id, str(job.status), EventKind.ADOPTED)
            return
        if not self._post_unfound:
            return  # still in doubt: the caller reports it
        sent_at = self._turn()
        try:
            claimed = self.journal.reclaim(run, entry, self.owner, self._t())
        except MoveRefusedError:
            return  # another submitter resolved it first
        verdict, released = self._post(run, claimed, sent_at)
        if verdict is Verdict.NOT_ACTED:
            self._post_planned(run, released)

    def _look_up(self, url: str, posted_at: float, taken: Held) -> JobSummary | None:
        """``find_created`` at the pace's rate, tried again as the client would a read: a 429
        pauses every worker, other errors back off."""
        pace = self.pace  # without one, a lookup is tried once (the client's own policy)
        for attempt in range(1, LOOKUP_TRIES + 1):
            sent_at = self._turn()
            try:
                return find_created(
                    self.client, url, posted_at, skew_s=self.settings.skew_s, claims=taken
                )
            except GeonodeError as exc:
                if pace is None or attempt == LOOKUP_TRIES or not may_retry(exc, is_read=True):
                    raise
                limited = isinstance(exc, RateLimitedError)
                with self._lock:
                    ceiling = min(self.settings.backoff_max_s, 2 ** (attempt - 1))
                    wait = (exc.retry_after if limited else None) or self._rng.uniform(0, ceiling)
                if limited:
                    pace.throttled(sent_at, wait)
                else:
                    self._nap(wait)
        return None  # not reached: the last try returns or raises

    def _wait_for_held(self, run: Run) -> None:
        """Wait until the leases of entries other submitters hold have run out."""
        held = [e for e in self.journal.entries(run.name, [S.POSTING]) if e.owner != self.owner]
        if not held or not self.settings.wait_for_leases:
            return
        for entry in held:
            self._tell(EventKind.WAITING, entry)
        self._wait_until(max(e.lease_until or 0.0 for e in held))

    def _out_of_time(self) -> bool:
        return self._time_left() <= 0

    def _post_all(self, run: Run, entries: Sequence[Entry]) -> bool:
        """Post ``entries`` with the pace's workers (one without a pace) in a
        ``workers.PostingPool``; True when the caller's time ended it."""
        pool = PostingPool(
            entries,
            post=lambda entry: self._post_planned(run, entry),
            concurrency=self.pace.concurrency if self.pace is not None else lambda: 1,
            stopped=lambda: self._stopped is not None,
            out_of_time=self._out_of_time,
            lock=self._lock,
        )
        workers = self.pace.settings.workers if self.pace is not None else 1
        return pool.run(workers, lambda: self._doubt_in_flight(_INTERRUPTED))

    def _doubt_in_flight(self, reason: str) -> None:
        """What this submitter has in flight goes to doubt (its answer may never be read)."""
        with self._lock:
            held = list(self._in_flight.values())
            self._in_flight.clear()
        for entry in held:
            try:
                self._tell(
                    EventKind.IN_DOUBT, self.journal.doubt(entry, self.owner, reason, self._t())
                )
            except MoveRefusedError:
                continue  # its worker recorded the answer first

    def _post_planned(self, run: Run, entry: Entry) -> None:
        """Claim and post ``entry``; again after an answer that says the API did not act."""
        while self._stopped is None:
            if self._out_of_time():
                raise _OutOfTimeError  # released, not claimed again: the next call posts it
            # The send slot first, then the claim: a kill finds few entries claimed but unsent
            # (a batch left in doubt can never be looked up).
            sent_at = self._turn()
            try:
                claimed = self.journal.claim(entry, self.owner, self.clock.time())
            except MoveRefusedError:
                return  # another submitter has it
            verdict, entry = self._post(run, claimed, sent_at)
            if verdict is not Verdict.NOT_ACTED:
                return

    def _turn(self) -> float:
        """Wait for the pace's next send slot (no pace: now); the time it is sent at.

        A slot past the caller's time is not waited for (``_OutOfTimeError``).
        """
        if self.pace is None:
            return self._t()
        slot = self.pace.turn_before(self._t() + self._time_left())
        if slot is None:
            raise _OutOfTimeError
        return slot

    def _post(self, run: Run, claimed: Entry, sent_at: float) -> tuple[Verdict | None, Entry]:
        """One POST of a claimed entry and the move its answer calls for."""
        with self._lock:
            self._posts += 1
            self._in_flight[claimed.index] = claimed
        try:
            return self._post_claimed(run, claimed, sent_at)
        finally:
            with self._lock:
                self._in_flight.pop(claimed.index, None)

    def _post_claimed(
        self, run: Run, claimed: Entry, sent_at: float
    ) -> tuple[Verdict | None, Entry]:
        try:
            job = self._send(run, claimed.urls)
        except GeonodeError as exc:
            outcome = classify(exc)
            return outcome.verdict, self._failed(claimed, outcome, sent_at)
        except KeyboardInterrupt:
            # Ctrl-C mid-POST: the request may have gone out; in doubt now, not in 300 s.
            self._doubt_in_flight(_INTERRUPTED)
            raise
        except Exception as exc:
            # Not the API's answer but our reading of it, or a bug: the job may exist.
            self.journal.doubt(claimed, self.owner, f"unreadable answer: {exc!r}"[:300], self._t())
            raise
        with self._lock:
            self._not_acted = 0
        if self.pace is not None:
            self.pace.answered(sent_at)
        return None, self._submitted(run, claimed, job.job_id, str(job.status), EventKind.SUBMITTED)

    def _send(self, run: Run, urls: Sequence[str]) -> SubmittedJob:
        options = dict(run.options)
        if run.mode is RunMode.BATCH:
            return self.client.create_batch(list(urls), **options)
        if run.mode is RunMode.CRAWL:
            return self.client.create_crawl(urls[0], **options)
        return self.client.submit_extract(urls[0], **options)

    def _failed(self, claimed: Entry, outcome: Outcome, sent_at: float) -> Entry:
        verdict, now = outcome.verdict, self._t()
        if verdict is Verdict.REJECTED:
            with self._lock:
                self._not_acted = 0
            return self._tell(
                EventKind.REJECTED, self.journal.reject(claimed, self.owner, outcome.reason, now)
            )
        if verdict is Verdict.IN_DOUBT:
            with self._lock:
                self._not_acted = 0
            return self._tell(
                EventKind.IN_DOUBT, self.journal.doubt(claimed, self.owner, outcome.reason, now)
            )
        return self._not_acted_on(claimed, outcome, sent_at, now)

    def _not_acted_on(self, claimed: Entry, outcome: Outcome, sent_at: float, now: float) -> Entry:
        """An answer that says the API did not act: planned again, after a wait every worker
        keeps; the run stops when the answer says so or after too many in a row."""
        verdict = outcome.verdict
        released = self.journal.release(claimed, self.owner, outcome.reason, now)
        with self._lock:
            self._not_acted += 1
            self.throttled += 1
            if verdict.stops_run or self._not_acted >= self.settings.max_not_acted:
                if self._stopped is None:
                    self._stopped = outcome
                return released
            wait = self._backoff(outcome.retry_after)
        if self.pace is not None:
            self.pace.throttled(sent_at, wait)  # every worker waits, not only this one
        else:
            self._nap(wait)
        return released

    def _backoff(self, retry_after: float | None) -> float:
        """Retry-After when the API sent it, else exponential backoff with full jitter."""
        if retry_after is not None:
            return retry_after
        s = self.settings
        ceiling = min(s.backoff_max_s, s.backoff_base_s * 2 ** min(self._not_acted - 1, 30))
        return self._rng.uniform(0.0, ceiling)

    def _submitted(
        self, run: Run, entry: Entry, job_id: str, api_status: str | None, kind: EventKind
    ) -> Entry:
        """Record ``job_id`` for ``entry`` (held, or in doubt when ``kind`` is ADOPTED)."""
        now = self._t()
        try:
            if kind is EventKind.ADOPTED:
                recorded = self.journal.adopt(entry, job_id, now)
            else:
                recorded = self.journal.submit(entry, self.owner, job_id, now)
        except MoveRefusedError as exc:
            current = exc.entry
            if current is None or current.state is not S.IN_DOUBT:
                raise
            # Our lease ran out while the answer was on its way: the answer is the evidence.
            recorded = self.journal.adopt(current, job_id, now)
        # Announced before it is told: a listener's line for a batch says it was announced.
        return self._tell(kind, self._announced(run, recorded), api_status)

    def _announced(self, run: Run, entry: Entry) -> Entry:
        """Tell the ledger of a submitted batch or crawl (no API lists them), once."""
        if self._announce is None or run.mode is RunMode.ASYNC or entry.job_id is None:
            return entry
        self._announce(run.mode.kind, entry.job_id)
        return self.journal.announce(entry, self._t())

    def _announce_left(self, run: Run, entries: Sequence[Entry]) -> None:
        """Announce what an earlier call recorded but did not get to announce."""
        for entry in entries:
            if entry.state is S.SUBMITTED and not entry.announced:
                self._announced(run, entry)

    def _t(self) -> float:
        return self.clock.time()

    def _wait_until(self, when: float) -> None:
        wait = when - self.clock.time()
        if wait > 0:
            self._nap(wait)

    def _nap(self, seconds: float) -> None:
        """Every wait of the engine: never begun when it would outlast the caller's time."""
        if seconds > self._time_left():
            raise _OutOfTimeError
        self.sleep(seconds)

    def _tell(self, kind: EventKind, entry: Entry, api_status: str | None = None) -> Entry:
        self._listener(Event(kind, entry, api_status))
        return entry
