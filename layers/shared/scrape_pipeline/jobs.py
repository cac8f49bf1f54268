"""What a job is to the pipeline: its identity, where it stands, how it ended and why (the
domain's words, which the ledger stores; ``geonode.models`` are the API's own shapes)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, TypeGuard


class JobKind(StrEnum):
    """What kind of Geonode job this is (part of its identity: ids are per kind)."""

    EXTRACT = "extract"
    BATCH = "batch"
    CRAWL = "crawl"


class JobState(StrEnum):
    """Where a job's row is in the pipeline (no row: ``lifecycle.ABSENT``; moves: its ``MOVES``)."""

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
# What a stored job cost, as the API said (``detail["tokens_charged"]``: runs show adds it up;
# a batch's or crawl's is its ``token_summary.tokens_charged_total``).
DETAIL_TOKENS = "tokens_charged"
# A resubmitted job's detail: the job that carries on for it (noted ahead of the close too).
DETAIL_RESUBMITTED_AS: Final = "resubmitted_as"


class Source(StrEnum):
    """Where a job became known (a row's ``source``) and who sent a message. A label that is not
    a member (an operator's) reads as None."""

    WEBHOOK = "webhook"  # a delivery whose signature was verified
    SUBMITTED = "submitted"  # our own submitter, after the API's 202
    JOB_LIST = "job_list"  # the API listed it settled
    DELIVERY_LOG = "delivery_log"  # the API's delivery log named it
    CLI_REPLAY = "cli_replay"  # an operator replayed it from the delivery log
    ROTATION = "rotation_replay"  # replayed from the delivery log after a secret rotation
    # The rows the reconciler records WATCHING (the API listed them unsettled), and the
    # messages that wake them.
    WATCH = "watch"
    STUCK_ROWS = "stuck_rows"  # the stuck-rows sweep re-sent a message its row lost

    @classmethod
    def read(cls, label: str) -> Source | None:
        """The member ``label`` names, or None for a label that is not one of ours."""
        try:
            return cls(label)
        except ValueError:
            return None


# A job whose message comes from here exists: a 404 for it is the API's lag or an incident, never
# a reason to close it (a stuck row's re-send, or a label not ours, proves nothing by itself).
_PROVEN: Final = frozenset(Source) - {Source.STUCK_ROWS}


def source_proven(label: str) -> bool:
    """A message from ``label`` proves its job exists (``_PROVEN``)."""
    return label in _PROVEN


def source_recovers(label: str) -> bool:
    """A row from ``label`` (one not ours too) was written without the job's webhook: a later one
    was late, not lost (``Ledger.note_late_webhook``); our submission's row waits for its own."""
    return label not in (Source.WEBHOOK, Source.SUBMITTED)


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
