"""The submitter: works a run through its journal, posting each entry until it is settled.

One ``submit`` call plans the run (a rerun adds nothing), announces batches and crawls a
crash left unannounced, settles what an earlier submitter left in doubt, posts every planned
entry, then waits out the leases of entries another submitter left mid-POST. Each POST's
failure is classified by ``outcomes.classify``: an entry goes back to planned only when the
API certainly did not act. Time is the injected clock's and every wait goes through the
injected ``sleep``: nothing here sleeps on its own, prints or reads the environment.

With a ``Pace`` (``runs.pace``) several workers post at once, each entry claimed by one of
them under the journal's conditional write, at the rate the pace finds the API allows.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import socket
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from scrape_pipeline.clock import Clock
from scrape_pipeline.geonode.errors import GeonodeError, RateLimitedError
from scrape_pipeline.geonode.models import JobSummary, SubmittedJob
from scrape_pipeline.geonode.retry import may_retry
from scrape_pipeline.runs.doubt import DEFAULT_SKEW_S, Held, JobLister, find_created
from scrape_pipeline.runs.evidence import CandidateSource, JobReader, evidenced
from scrape_pipeline.runs.journal import Entry, Journal, MoveRefusedError
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.outcomes import Outcome, Verdict, classify
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import Run, RunMode, RunSpec
from scrape_pipeline.runs.workers import OutOfTimeError as _OutOfTimeError
from scrape_pipeline.runs.workers import PostingPool
from scrape_pipeline.settings import LISTING_LAG_FLOOR

S = EntryState
LOOKUP_TRIES = 6  # a lookup's tries with a pace (the client's own policy for reads)
_INTERRUPTED = "interrupted mid-POST (Ctrl-C): the answer may be lost"


class SubmitClient(JobLister, JobReader, Protocol):
    """The API calls a run makes (``GeonodeClient`` has them all)."""

    def submit_extract(self, url: str, **options: Any) -> SubmittedJob: ...

    def create_batch(self, urls: Iterable[str], **options: Any) -> SubmittedJob: ...

    def create_crawl(self, url: str, **options: Any) -> SubmittedJob: ...


class EventKind(StrEnum):
    """What happened to an entry, as the submitter tells its listener."""

    SUBMITTED = "submitted"
    ADOPTED = "adopted"
    REJECTED = "rejected"
    IN_DOUBT = "in_doubt"
    WAITING = "waiting"  # for the lease of an entry another submitter holds
    CATCHING_UP = "catching_up"  # in doubt: waiting for the job list to cover its POST


@dataclass(frozen=True)
class Event:
    """An entry's news; ``api_status`` is the job's status as the API last gave it."""

    kind: EventKind
    entry: Entry
    api_status: str | None = None


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


@dataclass(frozen=True)
class Planned:
    """A run as planning found it: ``resumed`` counts its entries by state (empty: new)."""

    run: Run
    created: bool
    resumed: dict[EntryState, int]


@dataclass(frozen=True)
class RunReport:
    """Where a run stands after one ``submit`` call."""

    run: Run
    planned_now: bool
    resumed: dict[EntryState, int]  # the states found at the start (empty: planned now)
    entries: list[Entry]
    posts: int  # POSTs this call sent
    stopped: Outcome | None = None  # why the call stopped with entries left planned
    cut: bool = False  # the caller's time ran out (a Lambda near its timeout)
    pause_s: float = 0.0  # how long the API asked to be left alone when the call ended
    counts: dict[EntryState, int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", dict(Counter(e.state for e in self.entries)))

    def where(self, state: EntryState) -> list[Entry]:
        """The entries in ``state``."""
        return [e for e in self.entries if e.state is state]

    @property
    def complete(self) -> bool:
        """Every entry submitted."""
        return self.counts.get(S.SUBMITTED, 0) == len(self.entries)


def new_owner() -> str:
    """A submitter's token: host, process and a random part (a restarted pid is not reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def holder_gone(owner: str | None) -> bool:
    """``owner`` (a ``new_owner`` token) is a process of this host no longer alive (only a
    pid of this host can be asked; one reused since reads as alive: the lease is waited out)."""
    host, _, rest = (owner or "").rpartition(":")[0].rpartition(":")
    if host != socket.gethostname() or not rest.isdigit():
        return False
    pid = int(rest)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists, under another user
    return False


class Submitter:
    """Posts runs through ``journal`` with ``client``; ``announce(kind, job_id)`` tells the
    ledger of each batch or crawl the moment its id is recorded. With ``pace``, several
    workers post at its rate (give it a client that leaves 429s to the submitter)."""

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

    # -- the run ---------------------------------------------------------------------------

    def submit(self, spec: RunSpec, name: str | None = None) -> RunReport:
        """Plan ``spec`` (as ``name`` or its derived name) and post what is not submitted."""
        return self.work(self.plan(spec, name))

    def plan(self, spec: RunSpec, name: str | None = None) -> Planned:
        """Plan ``spec`` in the journal (a rerun adds nothing) and say what was found there."""
        run, created = self.journal.plan(spec, name or spec.derived_name(), self.clock.time())
        found = {} if created else dict(Counter(e.state for e in self.journal.entries(run.name)))
        return Planned(run, created, found)

    def work(self, planned: Planned, time_left: Callable[[], float] | None = None) -> RunReport:
        """Post every entry of a planned run that is not settled yet, as far as the API lets.

        ``time_left`` (seconds), for a caller with a deadline of its own: no entry is claimed
        once it is spent and no wait is begun that would outlast it; the call then ends with
        the rest left as it was (``cut``).
        """
        run = planned.run
        self._posts, self._not_acted, self._stopped = 0, 0, None
        self._looked_up = set()
        self._time_left = time_left or (lambda: math.inf)
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
        planned_entries = self.journal.entries(run.name, [S.PLANNED])
        if self.pace is None or self.pace.settings.workers == 1:
            was_cut = self._post_serially(run, planned_entries)
        else:
            was_cut = self._post_in_parallel(run, planned_entries, self.pace.settings.workers)
        if self._stopped is None and not was_cut:
            self._wait_for_held(run)
            self._settle_doubts(run)
        return was_cut

    def _out_of_time(self) -> bool:
        return self._time_left() <= 0

    def settle(self, run: Run, *, post_unfound: bool = False) -> list[Entry]:
        """Resolve what is in doubt without posting planned entries (``runs resolve``): leases
        run out expired, extracts in doubt looked up and the job found adopted; one not found
        is posted again only with ``post_unfound``. The run's entries after."""
        self._posts, self._not_acted, self._stopped = 0, 0, None
        self._looked_up, self._post_unfound = set(), post_unfound
        self._time_left = lambda: math.inf
        try:
            self._announce_left(run, self.journal.entries(run.name, [S.SUBMITTED]))
            self._settle_doubts(run)
        finally:
            self._post_unfound = True
        return self.journal.entries(run.name)

    def _post_serially(self, run: Run, entries: Sequence[Entry]) -> bool:
        """Post ``entries`` one after another; True when the caller's time ended it."""
        for entry in entries:
            if self._out_of_time():
                return True
            try:
                self._post_planned(run, entry)
            except _OutOfTimeError:
                return True
            if self._stopped is not None:
                break
        return False

    def _post_in_parallel(self, run: Run, entries: Sequence[Entry], workers: int) -> bool:
        """Post ``entries`` with up to ``workers`` threads (``workers.PostingPool``); True when
        the caller's time ended it."""
        pace = self.pace
        assert pace is not None
        pool = PostingPool(
            entries,
            post=lambda entry: self._post_planned(run, entry),
            concurrency=pace.concurrency,
            stopped=lambda: self._stopped is not None,
            out_of_time=self._out_of_time,
            lock=self._lock,
        )
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

    # -- recording answers -----------------------------------------------------------------

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

    # -- doubt and leases ------------------------------------------------------------------

    def _settle_doubts(self, run: Run, *, ready_only: bool = False) -> None:
        """Expire leases run out; for extracts in doubt, adopt the job found, else post again.

        Each entry is looked up once per call; a batch or crawl in doubt is adopted when the
        evidence source names its job, else left for the operator (its report names it).
        ``ready_only``: skip extracts the list may not show yet (posted less than
        ``listing_delay_s`` ago; so does ``wait_for_doubts`` off), and batches and crawls
        (their evidence is read once, after posting: a rerun killed again would pay for it).
        """
        self._expire_leases(run)
        if run.mode is not RunMode.ASYNC:
            if ready_only:
                return
            found = evidenced(
                self._evidence, self.client, self.journal, run, skew_s=self.settings.skew_s
            )
            for entry, job_id in found:
                with contextlib.suppress(MoveRefusedError):  # another submitter settled it
                    self._submitted(run, entry, job_id, None, EventKind.ADOPTED)
            return
        taken = Held(self.journal, run)  # every run's jobs: never adopted by another
        for entry in self.journal.entries(run.name, [S.IN_DOUBT]):
            if entry.index in self._looked_up or self._stopped is not None:
                continue
            posted_at = entry.posted_at if entry.posted_at is not None else self._t()
            waits = ready_only or not self.settings.wait_for_doubts
            if waits and posted_at + self.settings.listing_delay_s > self._t():
                continue
            self._looked_up.add(entry.index)
            self._resolve(run, entry, taken)

    def _expire_leases(self, run: Run) -> None:
        """Entries another submitter left posting past its lease, or whose submitter's process
        is gone: in doubt, never planned."""
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

    def _resolve(self, run: Run, entry: Entry, taken: Held) -> None:
        posted_at = entry.posted_at if entry.posted_at is not None else self._t()
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
        """``find_created`` at the pace's rate, tried again as the client would a read (with a
        pace the client does not retry): a 429 pauses every worker, other errors back off."""
        tries = LOOKUP_TRIES if self.pace is not None else 1
        for attempt in range(1, tries + 1):
            sent_at = self._turn()
            try:
                return find_created(
                    self.client, url, posted_at, skew_s=self.settings.skew_s, claims=taken
                )
            except GeonodeError as exc:
                if attempt == tries or not may_retry(exc, is_read=True):
                    raise
                retry_after = exc.retry_after if isinstance(exc, RateLimitedError) else None
                with self._lock:
                    ceiling = min(self.settings.backoff_max_s, 2 ** (attempt - 1))
                    wait = retry_after or self._rng.uniform(0.0, ceiling)
                if self.pace is not None and isinstance(exc, RateLimitedError):
                    self.pace.throttled(sent_at, wait)
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

    # -- small helpers ---------------------------------------------------------------------

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


__all__: Sequence[str] = (
    "Event",
    "EventKind",
    "Planned",
    "RunReport",
    "SubmitClient",
    "Submitter",
    "SubmitterSettings",
    "holder_gone",
    "new_owner",
)
