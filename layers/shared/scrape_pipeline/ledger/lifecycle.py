"""A job's lifecycle: every move of its ledger row, written under its from-states (docs/lifecycle.md
renders ``MOVES``; which move evidence calls for is ``evidence``'s and ``decide``'s)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Final

from scrape_pipeline.jobs import JobState


class Absent(Enum):
    """No row for the job (a state here, not a ``JobState``: no row can store "no row")."""

    ABSENT = "ABSENT"


ABSENT: Final = Absent.ABSENT
type RowState = JobState | Absent  # where a job's row can be, "no row" included

RECEIVED, ENQUEUED, PROCESSING, WATCHING, DONE = JobState
# Where a row waits for its message or for evidence (the sweeps find it there).
WAITING: Final = (RECEIVED, ENQUEUED, WATCHING)
_HOLDER = "the caller holds the lease"


class Verb(StrEnum):
    """A write of the ledger's, named after the ``Ledger`` method that makes it (or its short
    form: ``reopened``, ``link_run_update``)."""

    RECORD = "record"
    FORGET_UNSENT = "forget_unsent"
    ENQUEUE = "enqueue"
    REOPEN = "reopen"
    UNCLAIM = "unclaim"
    ACQUIRE = "acquire"
    CHECKPOINT = "checkpoint"
    RELEASE = "release"
    WATCH = "watch"
    FINISH = "finish"
    NOTE_LATE_WEBHOOK = "note_late_webhook"
    CLEAR_OUTBOX = "clear_outbox"
    LINK_RUN = "link_run"
    RETELL = "retell"
    NOTE_ITEM_RETRY = "note_item_retry"
    SETTLE_ITEMS = "settle_items"
    LINK_RETRY = "link_retry"
    NOTE_RESUBMISSION = "note_resubmission"
    CARRY_RUN = "carry_run"


@dataclass(frozen=True)
class Move:
    """A write from one of ``sources`` to one of ``targets`` (none: the state kept) if ``guard``
    holds too."""

    verb: Verb
    sources: tuple[RowState, ...]
    targets: tuple[RowState, ...]
    guard: str = ""


V = Verb  # short, so that each move is one line and the table reads as a table
RECORD = Move(V.RECORD, (ABSENT,), WAITING)
FORGET_UNSENT = Move(V.FORGET_UNSENT, (RECEIVED,), (ABSENT,), "the writer's own row (its token)")
ENQUEUE = Move(
    V.ENQUEUE, WAITING, (ENQUEUED,), "unmoved since read; a webhook's delivery id not seen"
)
REOPEN = Move(
    V.REOPEN,
    (DONE,),
    (ENQUEUED,),
    "closed for a reopenable reason, as read; under max_reopens; delivery id not seen",
)
UNCLAIM = Move(V.UNCLAIM, (ENQUEUED,), (*WAITING, DONE), "as enqueue/reopen wrote it; put back")
ACQUIRE = Move(V.ACQUIRE, (ABSENT, *WAITING), (PROCESSING,))
TAKE_OVER = Move(V.ACQUIRE, (PROCESSING,), (PROCESSING,), "the lease has expired")
CHECKPOINT = Move(V.CHECKPOINT, (PROCESSING,), (), _HOLDER)
RELEASE = Move(V.RELEASE, (PROCESSING,), (ENQUEUED,), _HOLDER)
WATCH = Move(V.WATCH, (PROCESSING,), (WATCHING,), _HOLDER)
FINISH = Move(V.FINISH, (PROCESSING,), (DONE,), _HOLDER)
NOTE_LATE_WEBHOOK = Move(V.NOTE_LATE_WEBHOOK, tuple(JobState), (), "not marked late before")
# Any state: a row reopened before its close's event went out still owes it.
CLEAR_OUTBOX = Move(V.CLEAR_OUTBOX, tuple(JobState), (), "its pending event as emitted")
LINK_RUN = Move(V.LINK_RUN, tuple(JobState), (), "in the write of the job id to the run")
# A settled row's event owed again, naming the run linked after it was written.
RETELL = Move(V.RETELL, (DONE,), (), "its event as written, without its run")
# A batch's or crawl's items retried as extract jobs (``resubmission``).
NOTE_ITEM_RETRY = Move(V.NOTE_ITEM_RETRY, (PROCESSING,), (), _HOLDER)
SETTLE_ITEMS = Move(V.SETTLE_ITEMS, (PROCESSING,), (), _HOLDER)
LINK_NEW_RETRY = Move(V.LINK_RETRY, (ABSENT,), (WATCHING,), "a retry's job not known yet")
LINK_RETRY = Move(V.LINK_RETRY, tuple(JobState), (), "linked to no item yet")
NOTE_RESUBMISSION = Move(V.NOTE_RESUBMISSION, (PROCESSING,), (), _HOLDER)
# A run's job resubmitted: the job that carries on names the run.
CARRY_NEW_RUN = Move(V.CARRY_RUN, (ABSENT,), (WATCHING,), "a resubmission's job not known yet")
CARRY_RUN = Move(V.CARRY_RUN, tuple(JobState), (), "naming no other run; its run only is written")
MOVES: Final = tuple(move for move in list(globals().values()) if isinstance(move, Move))
