"""The submitter's posting: claim each planned entry, POST it, and record what the answer says
in the journal (submitted, rejected, in doubt, or planned again when the API did not act).

``runs.engine.Submitter`` adds the run's flow and the settling of entries left in doubt.
Every wait is the injected clock's ``sleep`` and none outlasts the caller's time
(``_OutOfTimeError``).
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from scrape_pipeline.clock import Clock
from scrape_pipeline.geonode.errors import GeonodeError
from scrape_pipeline.geonode.models import SubmittedJob
from scrape_pipeline.geonode.settings import LISTING_LAG_FLOOR
from scrape_pipeline.runs.doubt import DEFAULT_SKEW_S, JobLister
from scrape_pipeline.runs.evidence import CandidateSource, JobReader
from scrape_pipeline.runs.journal import Entry, Journal, MoveRefusedError
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import Pace, PostingPool, _OutOfTimeError, new_owner
from scrape_pipeline.runs.plan import Run, RunMode
from scrape_pipeline.runs.report import Event, EventKind, Outcome, Verdict, classify

S = EntryState
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


class Posting:
    """Posts a run's entries through ``journal`` with ``client`` and records each answer;
    ``announce(kind, job_id)`` tells the ledger of each batch or crawl once its id is recorded;
    ``pace`` sets its send rate and workers."""

    def __init__(
        self,
        journal: Journal,
        client: SubmitClient,
        *,
        clock: Clock,
        pace: Pace,
        settings: SubmitterSettings = SubmitterSettings(),
        announce: Callable[[str, str], None] | None = None,
        listener: Callable[[Event], None] = lambda event: None,
        rng: random.Random | None = None,
        evidence: CandidateSource | None = None,
    ) -> None:
        self.journal = journal
        self.client = client
        self.clock = clock
        self.settings = settings
        self.owner = new_owner()
        self._announce = announce
        self._listener = listener
        self._rng = rng or random.Random()  # backoff jitter only
        self._evidence = evidence  # names batches and crawls no API lists (evidence.py)
        self.pace = pace
        self._lock = threading.RLock()  # the counters below, shared by the workers
        self._in_flight: dict[int, Entry] = {}  # claimed by this submitter, answer not recorded
        self.throttled = 0  # POSTs answered "not acted on" (429 and the like)
        self._begin(None)

    def _begin(self, time_left: Callable[[], float] | None, *, post_unfound: bool = True) -> None:
        """A call's counters, afresh; ``post_unfound``: an extract not found is posted again."""
        self._posts, self._not_acted = 0, 0
        self._stopped: Outcome | None = None
        self._looked_up: set[int] = set()
        self._post_unfound = post_unfound
        self._time_left: Callable[[], float] = time_left or (lambda: math.inf)

    def _out_of_time(self) -> bool:
        return self._time_left() <= 0

    def _post_all(self, run: Run, entries: Sequence[Entry]) -> bool:
        """Post ``entries`` with the pace's workers in a ``pace.PostingPool``; True when the
        caller's time ended it."""
        pool = PostingPool(
            entries,
            post=lambda entry: self._post_planned(run, entry),
            concurrency=self.pace.concurrency,
            stopped=lambda: self._stopped is not None,
            out_of_time=self._out_of_time,
            lock=self._lock,
        )
        return pool.run(self.pace.settings.workers, lambda: self._doubt_in_flight(_INTERRUPTED))

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
        """Wait for the pace's next send slot; the time it is sent at. A slot past the caller's
        time is not waited for (``_OutOfTimeError``)."""
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
        now = self._t()
        recorded = {
            Verdict.REJECTED: (EventKind.REJECTED, self.journal.reject),
            Verdict.IN_DOUBT: (EventKind.IN_DOUBT, self.journal.doubt),
        }.get(outcome.verdict)
        if recorded is None:
            return self._not_acted_on(claimed, outcome, sent_at, now)
        with self._lock:
            self._not_acted = 0  # the API acted, or may have: no longer "in a row"
        kind, move = recorded
        return self._tell(kind, move(claimed, self.owner, outcome.reason, now))

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
            wait = self._backoff(outcome.retry_after, self._not_acted)
        self.pace.throttled(sent_at, wait)  # every worker waits, not only this one
        return released

    def _backoff(self, retry_after: float | None, attempt: int) -> float:
        """Retry-After when the API sent it, else exponential backoff with full jitter."""
        if retry_after is not None:
            return retry_after
        s = self.settings
        ceiling = min(s.backoff_max_s, s.backoff_base_s * 2 ** min(attempt - 1, 30))
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
        self.clock.sleep(seconds)

    def _tell(self, kind: EventKind, entry: Entry, api_status: str | None = None) -> Entry:
        self._listener(Event(kind, entry, api_status))
        return entry
