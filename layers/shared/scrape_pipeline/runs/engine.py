"""The submitter: plans a run, settles what a crash left (unannounced, in doubt, leases run
out), posts every planned entry (``posting``); time and waits are the injected clock's."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable

from scrape_pipeline.geonode.errors import GeonodeError, RateLimitedError
from scrape_pipeline.geonode.models import JobSummary
from scrape_pipeline.geonode.retry import may_retry
from scrape_pipeline.runs.doubt import Held, find_created
from scrape_pipeline.runs.evidence import evidenced
from scrape_pipeline.runs.journal import Entry, MoveRefusedError
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.pace import _OutOfTimeError, holder_gone
from scrape_pipeline.runs.plan import Run, RunMode, RunSpec
from scrape_pipeline.runs.posting import Posting
from scrape_pipeline.runs.report import EventKind, Planned, RunReport, Verdict

S = EntryState
LOOKUP_TRIES = 6  # a lookup's tries (the client's own policy for reads)


class Submitter(Posting):
    """Plans runs and posts them (``Posting``), settling what a crash left in doubt."""

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
        pause = self.pace.paused_until() - self._t()
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
                elif holder_gone(entry.owner):
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
        for attempt in range(1, LOOKUP_TRIES + 1):
            sent_at = self._turn()
            try:
                return find_created(
                    self.client, url, posted_at, skew_s=self.settings.skew_s, claims=taken
                )
            except GeonodeError as exc:
                if attempt == LOOKUP_TRIES or not may_retry(exc, is_read=True):
                    raise
                self._wait_to_look_again(exc, attempt, sent_at)
        return None  # not reached: the last try returns or raises

    def _wait_to_look_again(self, exc: GeonodeError, attempt: int, sent: float) -> None:
        """A 429's wait (its Retry-After) pauses every worker; another error's, this one."""
        with self._lock:
            wait = self._backoff(exc.retry_after, attempt)  # only a 429 carries a Retry-After
        if isinstance(exc, RateLimitedError):
            self.pace.throttled(sent, wait)
        else:
            self._nap(wait)

    def _wait_for_held(self, run: Run) -> None:
        """Wait until the leases of entries other submitters hold have run out."""
        held = [e for e in self.journal.entries(run.name, [S.POSTING]) if e.owner != self.owner]
        if not held or not self.settings.wait_for_leases:
            return
        for entry in held:
            self._tell(EventKind.WAITING, entry)
        self._wait_until(max(e.lease_until or 0.0 for e in held))
