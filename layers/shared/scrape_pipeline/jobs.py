"""What a job is to the pipeline: its identity, where it stands, how it ended and why.

These are the domain's words, shared by the receiver, the processor, the reconciler and the
tools; how a job is stored is the ledger's business (``scrape_pipeline.ledger``), and the
API's own shapes are ``scrape_pipeline.geonode.models``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeGuard


class JobKind(StrEnum):
    """What kind of Geonode job this is (part of its identity: ids are per kind)."""

    EXTRACT = "extract"
    BATCH = "batch"
    CRAWL = "crawl"


class JobState(StrEnum):
    """Where a job's row is in the pipeline (no row: ``lifecycle.ABSENT``).

    Its moves, not all of them forward, are the table ``scrape_pipeline.lifecycle.MOVES``.
    """

    RECEIVED = "RECEIVED"
    ENQUEUED = "ENQUEUED"
    PROCESSING = "PROCESSING"
    # Not settled after a long time: parked without a message; woken by evidence it settled.
    WATCHING = "WATCHING"
    DONE = "DONE"


class Outcome(StrEnum):
    """How a DONE job ended."""

    STORED = "stored"
    RESUBMITTED = "resubmitted"
    DEAD_LETTERED = "dead_lettered"
    CANCELLED = "cancelled"


# Why a job was dead-lettered (``detail["reason"]``).
REASON_POISON = "failed on every attempt"
REASON_NEVER_SETTLED = "never settled"
REASON_UNKNOWN_JOB = "unknown job"
# The reasons that later evidence of a settled job overturns (``Ledger.reopen``).
REOPENABLE_REASONS = frozenset({REASON_NEVER_SETTLED, REASON_UNKNOWN_JOB})
# Where a job became known (a row's ``source``, set when the row is created).
SOURCE_WEBHOOK = "webhook"  # a delivery whose signature was verified
SOURCE_SUBMITTED = "submitted"  # our own submitter, after the API's 202
SOURCE_JOB_LIST = "job_list"  # the API listed it settled
SOURCE_DELIVERY_LOG = "delivery_log"  # the API's delivery log named it
SOURCE_CLI_REPLAY = "cli_replay"  # an operator replayed it from the delivery log
SOURCE_ROTATION = "rotation_replay"  # replayed from the delivery log after a secret rotation
# The source of the rows the reconciler records WATCHING (the API listed them unsettled) and
# of the messages that wake them.
SOURCE_WATCH = "watch"
# Sources that prove the job exists: a 404 for such a job is the API's lag or an incident,
# never a reason to close it (others, such as an operator's replay of a bare id, prove nothing).
PROVEN_SOURCES = frozenset(
    {
        SOURCE_WEBHOOK,
        SOURCE_SUBMITTED,
        SOURCE_JOB_LIST,
        SOURCE_DELIVERY_LOG,
        SOURCE_CLI_REPLAY,
        SOURCE_ROTATION,
        SOURCE_WATCH,
    }
)

# Ids the API issues are UUIDs; this admits any opaque token but nothing that could be a path,
# an expression, a log-injection payload or text DynamoDB cannot store (a lone surrogate).
_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def is_job_id(value: object) -> TypeGuard[str]:
    """A string shaped like the ids the API issues: what the receiver and the queue accept."""
    return isinstance(value, str) and _JOB_ID.fullmatch(value) is not None


@dataclass(frozen=True)
class JobKey:
    """A job's identity: its kind and its Geonode id (never a delivery id)."""

    kind: JobKind
    job_id: str

    @property
    def pk(self) -> str:
        """The identity as one string, ``kind#job_id`` (the ledger's partition key)."""
        return f"{self.kind.value}#{self.job_id}"

    @classmethod
    def from_pk(cls, pk: str) -> JobKey:
        """Read ``kind#job_id`` back."""
        kind, _, job_id = pk.partition("#")
        return cls(JobKind(kind), job_id)


__all__: Sequence[str] = (
    "PROVEN_SOURCES",
    "REASON_NEVER_SETTLED",
    "REASON_POISON",
    "REASON_UNKNOWN_JOB",
    "REOPENABLE_REASONS",
    "SOURCE_CLI_REPLAY",
    "SOURCE_DELIVERY_LOG",
    "SOURCE_JOB_LIST",
    "SOURCE_ROTATION",
    "SOURCE_SUBMITTED",
    "SOURCE_WATCH",
    "SOURCE_WEBHOOK",
    "JobKey",
    "JobKind",
    "JobState",
    "Outcome",
    "is_job_id",
)
