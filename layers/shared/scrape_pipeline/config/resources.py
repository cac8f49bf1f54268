"""The AWS resources the stack hands the Lambdas, and the ledger's two knobs, declared once for
every function that reads them (``LedgerSettings``, or alone: ``QUEUE_URL.read(env)``)."""

from __future__ import annotations

from dataclasses import dataclass

from scrape_pipeline.config.settings import FromEnv, Setting, integer
from scrape_pipeline.ledger.table import DEFAULT_MAX_REOPENS, DEFAULT_TTL_DAYS

LEDGER_TABLE_NAME = Setting("LEDGER_TABLE_NAME", "", "the ledger table", required=True)
QUEUE_URL = Setting(
    "QUEUE_URL",
    "",
    "the job queue (the processor re-sends delayed copies to it)",
    required=True,
)
RESULTS_BUCKET = Setting(
    "RESULTS_BUCKET",
    "",
    "where the processor stores results and dead-letter records, and the reconciler each "
    "run's manifest",
    required=True,
)
EVENT_BUS_NAME = Setting(
    "EVENT_BUS_NAME",
    "",
    "the stack's EventBridge bus: each outcome (stored, dead-lettered, cancelled) is put on "
    "it as one event; empty: no events, and no outbox kept",
)
LEDGER_TTL_DAYS = integer(
    "LEDGER_TTL_DAYS",
    DEFAULT_TTL_DAYS,
    "a row expires this long after its **last change** (every write pushes `expires_at`), so "
    "a job still being resubmitted, watched or replayed keeps its row; an operator's replay "
    "for a job whose row has been unchanged for longer than this is taken as new (a webhook "
    "that old is refused by `WEBHOOK_MAX_AGE_SECONDS` first). Senders retry far less long "
    "(Stripe 3 days, Svix 14)",
)
MAX_REOPENS = integer(
    "MAX_REOPENS",
    DEFAULT_MAX_REOPENS,
    "a job closed as unknown or never settled comes back at most this many times, whatever "
    "the evidence (its webhook, the job list, the delivery log): one reopen usually settles "
    "it; more is a loop or a replayer, and the dead-letter record stands",
    minimum=0,
)


@dataclass(frozen=True)
class LedgerSettings(FromEnv):
    """The ledger's table and the two knobs every writer of it shares."""

    table_name: str = LEDGER_TABLE_NAME.field()
    ttl_days: int = LEDGER_TTL_DAYS.field()
    max_reopens: int = MAX_REOPENS.field()
