"""The API's job statuses as a type, and what a status says: whether it can still change."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final


class ApiStatus(StrEnum):
    """A job's, batch's, crawl's or item's status; the last three never change again. Another
    value is kept as written (``read_status``): not terminal, so it is looked at again."""

    QUEUED = "queued"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATUSES: Final = frozenset({ApiStatus.COMPLETED, ApiStatus.FAILED, ApiStatus.CANCELLED})
_STATUS_BY_VALUE: Final[Mapping[str, ApiStatus]] = {s.value: s for s in ApiStatus}


def read_status(value: Any) -> ApiStatus | str:
    """The ``ApiStatus`` the API named, or its text as written when it names none of them."""
    text = str(value)
    return _STATUS_BY_VALUE.get(text, text)


class Settles:
    """What has a status: it is terminal once the status is one that never changes again."""

    status: ApiStatus | str

    @property
    def is_terminal(self) -> bool:
        """Completed, failed or cancelled: the status will never change again."""
        return self.status in TERMINAL_STATUSES
