"""Counters and checkpoints kept in the ledger table beside the job rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scrape_pipeline.jobs import JobKey
from scrape_pipeline.ledger.attributes import Attr, RowPrefix
from scrape_pipeline.ledger.expressions import Field, Update
from scrape_pipeline.ledger.rows import encode
from scrape_pipeline.ledger.table import ConditionFailedError, call, write

if TYPE_CHECKING:
    from scrape_pipeline.ledger.work import WorkLedger


class Bookkeeping:
    """``chain#<kind>#<job_id>`` rows (a job's depth in its chain of resubmissions) and
    ``meta#<name>`` rows (the reconciler's watermark and checkpoints)."""

    def __init__(self, ledger: WorkLedger) -> None:
        self._ledger = ledger

    def chain_depth(self, key: JobKey) -> int:
        """How many resubmissions came before ``key`` in its chain (0: it starts one)."""
        items = self._ledger.batch_items([f"{RowPrefix.CHAIN}{key.pk}"])
        # BatchGetItem, the processor's one read (its role has no GetItem), for one key.
        return int(items[0][Attr.DEPTH]["N"]) if items else 0  # record_chain writes the depth

    def record_chain(self, key: JobKey, depth: int) -> bool:
        """Record ``key`` as its chain's ``depth``-th resubmission unless recorded already (True:
        this call wrote it)."""
        ledger = self._ledger
        expires = ledger.expiry(ledger.clock.time())
        update = Update().set(Attr.DEPTH, depth).set(Attr.EXPIRES_AT, expires)
        try:
            # UpdateItem creates the row: the processor writes nothing but conditional updates.
            write(
                ledger.client,
                ledger.table_name,
                Field(Attr.DEPTH).not_exists(),
                pk=f"{RowPrefix.CHAIN}{key.pk}",
                update=update,
            )
        except ConditionFailedError:
            return False
        return True

    def read(self, name: str) -> dict[str, str] | None:
        """A checkpoint's fields, or None before the first write."""
        item = self._ledger.get_item(f"{RowPrefix.META}{name}")
        return _fields(item) if item else None

    def read_many(self, names: Sequence[str]) -> dict[str, dict[str, str]]:
        """The fields of each checkpoint of ``names`` written so far."""
        pks = [f"{RowPrefix.META}{name}" for name in names]
        items = self._ledger.batch_items(pks)
        return {item[Attr.PK]["S"].removeprefix(RowPrefix.META): _fields(item) for item in items}

    def write(self, name: str, fields: Mapping[str, str]) -> None:
        """Replace a checkpoint's fields."""
        item = {Attr.PK.value: encode(f"{RowPrefix.META}{name}")}
        item.update({k: encode(v) for k, v in fields.items()})
        # Unconditional: the reconciler is the one writer of its checkpoints.
        call(self._ledger.client, "PutItem", TableName=self._ledger.table_name, Item=item)


def _fields(item: Mapping[str, Any]) -> dict[str, str]:
    return {k: v.get("S", v.get("N", "")) for k, v in item.items() if k != Attr.PK}
