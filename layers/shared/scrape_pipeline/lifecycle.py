"""A job's lifecycle: where its row can be, where it waits, and every move the ledger makes.

``MOVES`` is the state machine's one home. ``scrape_pipeline.ledger`` derives the state part
of each conditional write from it (a move's guard, named here, is written there beside the
values it compares); ``tests/property/test_ledger_stateful.py`` checks every move it observes
against it; the README's table and diagram are rendered from it and pinned by
``tests/unit/test_lifecycle.py``, so a change to the lifecycle is a reviewed diff.

"No row" is a state here (``ABSENT``) but not a ``JobState``: a ``JobState`` is what a row
stores, and no row can store "no row" (``record``, ``pending`` and every reader of ``state``
would otherwise have to refuse it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from itertools import product
from typing import Final

from scrape_pipeline.jobs import JobState


class Absent(Enum):
    """The ledger has no row for the job: not yet recorded, or its writer's row undone."""

    ABSENT = "ABSENT"


ABSENT: Final = Absent.ABSENT
# Where a job's row can be, "no row" included.
type RowState = JobState | Absent

RECEIVED, ENQUEUED, PROCESSING, WATCHING, DONE = (
    JobState.RECEIVED,
    JobState.ENQUEUED,
    JobState.PROCESSING,
    JobState.WATCHING,
    JobState.DONE,
)
# Where a row waits for its message or for evidence: the sweeps find it there, any evidence
# that the job settled may enqueue it, and a processor may lease it straight away. (A
# PROCESSING row waits for its lease holder; the stuck-rows sweep looks at it only once the
# lease has expired.)
WAITING: Final = (RECEIVED, ENQUEUED, WATCHING)
_HOLDER = "the caller holds the lease"


class Verb(StrEnum):
    """A write of the ledger's, named after the ``Ledger`` method that makes it."""

    RECORD = "record"
    FORGET_UNSENT = "forget_unsent"
    ENQUEUE = "enqueue"  # also ``mark_enqueued``, which says only whether it moved
    REOPEN = "reopen"  # also ``reopened``, which returns the row written
    UNCLAIM = "unclaim"
    ACQUIRE = "acquire"
    CHECKPOINT = "checkpoint"
    RELEASE = "release"
    WATCH = "watch"
    PARK = "park"
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
    """A write that takes a row from one of ``sources`` to one of ``targets``, if ``guard``.

    No ``targets``: the row keeps its state (the write notes something on it). No ``guard``:
    the state is the whole condition.
    """

    verb: Verb
    sources: tuple[RowState, ...]
    targets: tuple[RowState, ...]
    guard: str = ""

    def allows(self, before: RowState, after: RowState) -> bool:
        """This move may take a row in ``before`` to ``after``."""
        if before not in self.sources:
            return False
        return after in self.targets if self.targets else after == before


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
PARK = Move(V.PARK, (PROCESSING,), (WATCHING,), _HOLDER)
FINISH = Move(V.FINISH, (PROCESSING,), (DONE,), _HOLDER)
NOTE_LATE_WEBHOOK = Move(V.NOTE_LATE_WEBHOOK, tuple(JobState), (), "not marked late before")
# Any state: a row reopened before its close's event went out still owes that event.
CLEAR_OUTBOX = Move(V.CLEAR_OUTBOX, tuple(JobState), (), "its pending event as emitted")
# A run's journal names the job of a row that exists already (its webhook came first).
LINK_RUN = Move(V.LINK_RUN, tuple(JobState), (), "in the write of the job id to the run")
# A settled row's event owed again, now naming its run (linked after the event was written).
RETELL = Move(V.RETELL, (DONE,), (), "its event as written, without its run")
# A batch's or crawl's items retried as extract jobs (``scrape_pipeline.item_retries``): the
# holder notes each retry's job id on the row as soon as the API answers with it, then takes
# the settled ones off with their counts; the extract job's row is linked to its item (recorded
# WATCHING if it has no row yet, as a submission's is).
NOTE_ITEM_RETRY = Move(V.NOTE_ITEM_RETRY, (PROCESSING,), (), _HOLDER)
SETTLE_ITEMS = Move(V.SETTLE_ITEMS, (PROCESSING,), (), _HOLDER)
LINK_NEW_RETRY = Move(V.LINK_RETRY, (ABSENT,), (WATCHING,), "a retry's job not known yet")
LINK_RETRY = Move(V.LINK_RETRY, tuple(JobState), (), "linked to no item yet")
# A followed job resubmitted (an item's retry, a run's job): its holder notes the new job before
# it closes the row, so the batch or run follows the chain on even if every holder of the row
# dies after the POST.
NOTE_RESUBMISSION = Move(V.NOTE_RESUBMISSION, (PROCESSING,), (), _HOLDER)
# A run's job resubmitted: the job that carries on names the run on its row (recorded WATCHING
# as a submission is, if it has no row yet), so the run follows the chain and its event names it.
CARRY_NEW_RUN = Move(V.CARRY_RUN, (ABSENT,), (WATCHING,), "a resubmission's job not known yet")
CARRY_RUN = Move(V.CARRY_RUN, tuple(JobState), (), "naming no other run; its run only is written")
MOVES: Final = (
    RECORD,
    FORGET_UNSENT,
    ENQUEUE,
    REOPEN,
    UNCLAIM,
    ACQUIRE,
    TAKE_OVER,
    CHECKPOINT,
    RELEASE,
    WATCH,
    PARK,
    FINISH,
    NOTE_LATE_WEBHOOK,
    CLEAR_OUTBOX,
    LINK_RUN,
    RETELL,
    NOTE_ITEM_RETRY,
    SETTLE_ITEMS,
    LINK_NEW_RETRY,
    LINK_RETRY,
    NOTE_RESUBMISSION,
    CARRY_NEW_RUN,
    CARRY_RUN,
)


def _names(states: Sequence[RowState]) -> str:
    return ", ".join(state.value for state in states) or "(unchanged)"


def markdown() -> str:
    """The table as markdown: the waiting set, then one line per move."""
    lines = [
        f"Waiting states (for a message or evidence; the sweeps read them): {_names(WAITING)}.",
        "",
        "| verb | from | to | guard |",
        "|---|---|---|---|",
    ]
    for move in MOVES:
        row = (f"`{move.verb}`", _names(move.sources), _names(move.targets), move.guard or "—")
        lines.append(f"| {' | '.join(row)} |")
    return "\n".join(lines) + "\n"


def _node(state: RowState) -> str:
    return "[*]" if state is ABSENT else state.value


def mermaid() -> str:
    """The moves that change a row's state as a Mermaid ``stateDiagram-v2`` (no row: ``[*]``)."""
    edges: dict[tuple[str, str], dict[str, None]] = {}  # (from, to) -> verbs, in table order
    for move in MOVES:
        for source, target in product(move.sources, move.targets):
            edges.setdefault((_node(source), _node(target)), {})[move.verb.value] = None
    lines = ["stateDiagram-v2"]
    lines += [f"    {a} --> {b}: {', '.join(verbs)}" for (a, b), verbs in edges.items()]
    return "\n".join(lines) + "\n"


__all__: Sequence[str] = (
    "ABSENT",
    "ACQUIRE",
    "CARRY_NEW_RUN",
    "CARRY_RUN",
    "CHECKPOINT",
    "CLEAR_OUTBOX",
    "ENQUEUE",
    "FINISH",
    "FORGET_UNSENT",
    "LINK_NEW_RETRY",
    "LINK_RETRY",
    "MOVES",
    "NOTE_ITEM_RETRY",
    "NOTE_LATE_WEBHOOK",
    "PARK",
    "RECORD",
    "RELEASE",
    "REOPEN",
    "SETTLE_ITEMS",
    "TAKE_OVER",
    "UNCLAIM",
    "WAITING",
    "WATCH",
    "Absent",
    "Move",
    "RowState",
    "Verb",
    "markdown",
    "mermaid",
)
