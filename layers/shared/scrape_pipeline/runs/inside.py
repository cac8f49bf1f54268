"""One message of the submitter function: a run worked until the invocation's time is nearly
up, then handed on by a (delayed) continuation; nothing here waits out a lease or a lag."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from scrape_pipeline.clock import Clock
from scrape_pipeline.config.settings import FromEnv, Setting, integer, number
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.journal import Journal, RunMismatchError
from scrape_pipeline.runs.moves import EntryState
from scrape_pipeline.runs.plan import BadPlanError, RunMode
from scrape_pipeline.runs.report import Planned, RunReport, catching_up
from scrape_pipeline.runs.request import (
    BadRequestError,
    Request,
    Start,
    continuation,
    options_key,
    requests_of,
    spec_of,
    urls_key,
)

SQS_MAX_DELAY_S: Final = 900
S = EntryState

SUBMISSIONS_QUEUE_URL = Setting(
    "SUBMISSIONS_QUEUE_URL", "", "where the submitter sends a run's continuation", required=True
)


@dataclass(frozen=True)
class InsideSettings(FromEnv):
    """The submitter function's knobs (the declarations are the documentation)."""

    queue_url: str = SUBMISSIONS_QUEUE_URL.field()
    margin_s: float = number(
        "SUBMITTER_MARGIN_SECONDS",
        60.0,
        "an invocation stops claiming entries when less than this is left and hands the run "
        "to the next one: one POST (`GEONODE_TIMEOUT_SECONDS`) and its journal writes fit",
    ).field()
    lease_s: float = number(
        "SUBMITTER_LEASE_SECONDS",
        90.0,
        "an entry's posting lease: longer than one POST, shorter than the submissions queue's "
        "visibility timeout, so the message of a killed invocation comes back to leases run out",
    ).field()
    retry_delay_s: int = integer(
        "SUBMITTER_RETRY_DELAY_SECONDS",
        60,
        "a run stopped by throttling, or with lookups that failed, is continued this much later",
        maximum=SQS_MAX_DELAY_S,
    ).field()
    evidence_delay_s: int = integer(
        "SUBMITTER_EVIDENCE_DELAY_SECONDS",
        SQS_MAX_DELAY_S,
        "a batch or crawl in doubt is looked for in the delivery log again this much later "
        "(it is named there once it settles)",
        maximum=SQS_MAX_DELAY_S,
    ).field()
    max_idle_rounds: int = integer(
        "SUBMITTER_MAX_IDLE_ROUNDS",
        30,
        "continuations in a row that change nothing before the run is left to the operator",
    ).field()


class Next(StrEnum):
    """What became of a run after one round."""

    DONE = "done"  # nothing planned, posting or in doubt is left for the function
    CONTINUED = "continued"  # a continuation was sent (now, or delayed)
    STOPPED = "stopped"  # left to the operator: the API refuses the key, or doubt remains
    DROPPED = "dropped"  # the request cannot be acted on (a bad file, another run's name)


@dataclass(frozen=True)
class Round:
    """One run's round: what became of it, why, and the report when it was worked."""

    run: str
    next: Next
    reason: str = ""
    report: RunReport | None = None
    delay_s: int = 0


# An object's text by bucket and key (None: no such object); a message sent ``delay_s`` later.
type ObjectReader = Callable[[str, str], str | None]
type Sender = Callable[[str, int], None]


class Inside:
    """Works the runs the submissions queue asks for, one invocation's worth at a time; a new
    ``submitter(journal)`` each round, so no leases of a killed invocation are taken as its own."""

    def __init__(
        self,
        settings: InsideSettings,
        *,
        journal: Journal,
        submitter: Callable[[Journal], Submitter],
        read: ObjectReader,
        send: Sender,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.journal = journal
        self._submitter = submitter
        self._read = read
        self._send = send
        self._clock = clock

    def handle(self, body: str, remaining_s: Callable[[], float]) -> list[Round]:
        """Every request of one queue message; a bad one is a DROPPED round, not a raise."""
        try:
            requests = requests_of(body)
        except (BadRequestError, BadPlanError) as exc:
            return [Round("?", Next.DROPPED, str(exc))]
        return [self._round(request, remaining_s) for request in requests]

    def _round(self, request: Request, remaining_s: Callable[[], float]) -> Round:
        submitter = self._submitter(self.journal)
        if isinstance(request, Start):
            try:
                urls = self._read(request.bucket, urls_key(request.run))
                if urls is None:
                    raise BadRequestError(f"s3://{request.bucket}/{urls_key(request.run)} is gone")
                spec = spec_of(urls, self._read(request.bucket, options_key(request.run)))
                planned = submitter.plan(spec, request.run)
            except (BadRequestError, RunMismatchError) as exc:
                return Round(request.run, Next.DROPPED, str(exc))
            idle = 0
        else:
            run = self.journal.run(request.run)
            if run is None:
                return Round(request.run, Next.DROPPED, "no such run in the journal")
            found = Counter(e.state for e in self.journal.entries(run.name))
            planned = Planned(run, created=False, resumed=dict(found))
            idle = request.idle
        report = submitter.work(planned, time_left=lambda: remaining_s() - self.settings.margin_s)
        return self._then(report, idle, submitter.settings.listing_delay_s)

    def _then(self, report: RunReport, idle: int, lag_s: float) -> Round:
        """Continue the run now, later, or not at all."""
        name = report.run.name
        if report.cut:
            # A Retry-After pause that outlasts the invocation is waited out by the queue.
            delay = math.ceil(report.pause_s)
            return self._continue(report, delay, 0, "the invocation's time is nearly up")
        if report.stopped is not None and report.stopped.verdict.stops_run:
            return Round(name, Next.STOPPED, report.stopped.reason, report)
        # Progress is a POST, or an entry in doubt adopted since the round began.
        adopted = report.counts.get(S.IN_DOUBT, 0) < report.resumed.get(S.IN_DOUBT, 0)
        idle = 0 if report.posts or adopted else idle + 1
        if report.stopped is not None:  # not acted on too many times in a row: later
            delay = self.settings.retry_delay_s
            return self._continue(report, delay, idle, report.stopped.reason)
        waiting = self._waiting(report, lag_s)
        if waiting is None:
            return Round(name, Next.DONE, "", report)
        delay, why = waiting
        return self._continue(report, delay, idle, why)

    def _waiting(self, report: RunReport, lag_s: float) -> tuple[int, str] | None:
        """How long a run that went as far as it could waits for its next round, and why; None
        when every entry is settled."""
        now = self._clock.time()
        held = [e.lease_until or now for e in report.where(S.POSTING)]
        if held:
            return int(max(held) - now) + 1, "another submitter holds entries"
        doubts = report.where(S.IN_DOUBT)
        if doubts:
            if report.run.mode is not RunMode.ASYNC:
                # The delivery log names one once it settles; a repost is the operator's call.
                why = f"{len(doubts)} {report.run.mode.kind}(s) in doubt, awaiting evidence"
                return self.settings.evidence_delay_s, why
            waiting = catching_up(doubts, lag_s, now)
            if waiting is not None:
                # Looked up only once the job list covers each POST: never posted again before.
                return math.ceil(waiting.until - now) + 1, waiting.why
            return self.settings.retry_delay_s, f"{len(doubts)} lookup(s) failed"
        if report.where(S.PLANNED):
            return 0, "entries left planned"
        return None

    def _continue(self, report: RunReport, delay_s: int, idle: int, why: str) -> Round:
        name = report.run.name
        if idle > self.settings.max_idle_rounds:
            why = f"{idle} rounds changed nothing: {why}, left for the operator"
            return Round(name, Next.STOPPED, why, report)
        delay = max(0, min(SQS_MAX_DELAY_S, delay_s))
        self._send(continuation(name, idle), delay)
        return Round(name, Next.CONTINUED, why, report, delay)
