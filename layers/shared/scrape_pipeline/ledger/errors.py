"""The ledger's own errors (AWS failures raise ``AWSUnavailableError``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scrape_pipeline.errors import PipelineError
from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.rows import LedgerRow


class LedgerError(PipelineError):
    """Base of the ledger's own errors (AWS failures raise ``AWSUnavailableError``)."""


class LeaseLostError(LedgerError):
    """The caller no longer holds the job's lease; ``row`` is the row as it is now."""

    def __init__(self, key: JobKey, row: LedgerRow | None) -> None:
        super().__init__(f"lease on {key.pk} is not held")
        self.key = key
        self.row = row


class ConditionFailedError(LedgerError):
    """A conditional write was refused: the row was not as the write required.

    ``old`` is the item as DynamoDB found it (None when there was none). Raised by ``call``
    and answered inside the package: callers get False, the old row, or ``LeaseLostError``.
    """

    def __init__(self, pk: str, old: Mapping[str, Any] | None) -> None:
        super().__init__(f"the condition on {pk} did not hold")
        self.pk = pk
        self.old = old
