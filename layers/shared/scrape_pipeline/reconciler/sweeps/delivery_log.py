"""The delivery-log sweep: each subscription's failed deliveries' jobs, read in passes from a
checkpoint less an overlap, resumed by page (rows only move down a page: none is skipped)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scrape_pipeline.geonode.errors import GeonodeError
from scrape_pipeline.geonode.models import Page
from scrape_pipeline.geonode.webhooks import Delivery
from scrape_pipeline.jobs import JobKey, Source
from scrape_pipeline.receiver.payload import EVENT_KINDS
from scrape_pipeline.reconciler.settings import ReconcilerSettings
from scrape_pipeline.reconciler.sweeps import (
    Budget,
    SavedPass,
    Sweep,
    SweepResult,
    created,
    ends,
    pending_field,
    saved_passes,
)

DELIVERIES_CHECKPOINT_PREFIX = "deliveries-"


@dataclass(frozen=True)
class _DeliveryCheckpoint:
    """One subscription's state, one bookkeeping row: attempts older than ``checkpoint`` (less
    the overlap) were read; ``resume``: the pass cut short, if any."""

    checkpoint: float
    resume: SavedPass | None = None

    @classmethod
    def read(cls, saved: Mapping[str, str] | None, default: float) -> _DeliveryCheckpoint:
        if not saved:
            return cls(default)
        return cls(float(saved["checkpoint"]), next(iter(saved_passes(saved)), None))

    def fields(self) -> dict[str, str]:
        out = {"checkpoint": f"{self.checkpoint:.3f}"}
        out.update(pending_field([self.resume] if self.resume is not None else []))
        return out

    def next_pass(self, overlap: float) -> tuple[float, float | None, int]:
        """The range and page the next pass reads: the pass cut short, or a fresh one (its top,
        None, is the newest attempt it meets)."""
        if self.resume is None:
            return self.checkpoint - overlap, None, 1
        return self.resume.start, self.resume.end, self.resume.page

    def after(self, low: float, high: float | None, next_page: int | None) -> _DeliveryCheckpoint:
        """The state once a pass over [low, high] stopped before ``next_page`` (None: finished,
        the checkpoint moves up to ``high``)."""
        if high is None:  # nothing read: nothing to resume, nothing to move
            return self
        if next_page is None:
            return _DeliveryCheckpoint(max(self.checkpoint, high))
        return _DeliveryCheckpoint(self.checkpoint, SavedPass(low, high, next_page))


@dataclass
class _Scan:
    """What one stretch of delivery-log pages gave."""

    next_page: int | None  # where to go on; None once the lower bound or the end was reached
    keys: list[JobKey] = field(default_factory=list)
    newest: float | None = None  # the newest attempt seen: a fresh pass's upper bound
    error: GeonodeError | None = None  # the page read that failed, after the pages before it


def _take(scan: _Scan, listing: Page[Delivery], low: float, only_status: int | None) -> bool:
    """Add the jobs of ``listing``'s attempts; True once the lower bound or the end is reached."""
    for delivery in listing.items:
        at = created(delivery, low)
        if at < low:
            return True
        scan.newest = at if scan.newest is None else max(scan.newest, at)
        if only_status in (None, delivery.http_status):
            scan.keys += _key(delivery)
    return ends(listing)


def _key(delivery: Delivery) -> list[JobKey]:
    kind = EVENT_KINDS.get(delivery.event_type)
    return [JobKey(kind, delivery.job_id)] if kind is not None and delivery.job_id else []


class DeliveryLogSweep(Sweep[ReconcilerSettings]):
    """Make sure of every job whose delivery failed, each subscription in an equal share."""

    name = Source.DELIVERY_LOG

    def work(self, budget: Budget, result: SweepResult) -> None:
        hooks = self._client.list_webhooks()
        pages = self.settings.job_list.max_pages
        for index, hook in enumerate(hooks):
            share = budget.share([1.0] * (len(hooks) - index))
            self._sweep_subscription(hook.id, result, share.capped(pages))

    def _sweep_subscription(self, webhook_id: str, result: SweepResult, budget: Budget) -> None:
        """One subscription's log: the pass cut short, if any, then a fresh one; the checkpoint
        saved once, then a failing page raised."""
        name = f"{DELIVERIES_CHECKPOINT_PREFIX}{webhook_id}"
        saved = self._books.read(name)
        mark = _DeliveryCheckpoint.read(
            saved, self._clock.time() - self.settings.job_list.lookback_seconds
        )
        read_before, resumed = result.delivery_pages, mark.resume is not None
        mark, scan = self._pass(webhook_id, mark, result, budget, read_before)
        spent = budget.spent(result.delivery_pages - read_before)
        if resumed and scan.next_page is None and not spent:
            mark, scan = self._pass(webhook_id, mark, result, budget, read_before)
        if mark.fields() != saved:  # None too: a checkpoint has fields
            self._books.write(name, mark.fields())
        if scan.error is not None:
            raise scan.error  # after saving the pages read before it

    def _pass(
        self,
        webhook_id: str,
        mark: _DeliveryCheckpoint,
        result: SweepResult,
        budget: Budget,
        read_before: int,
    ) -> tuple[_DeliveryCheckpoint, _Scan]:
        """One pass, resumed or fresh: the checkpoint after it, and its scan."""
        result.resumed_passes += int(mark.resume is not None)
        low, high, page = mark.next_pass(self.settings.delivery_overlap_seconds)
        scan = self.scan(webhook_id, low, page, result, budget, read_before=read_before)
        result.recovered += self.ensure(scan.keys, Source.DELIVERY_LOG)
        result.complete &= scan.next_page is None  # a failed page leaves the scan unfinished
        return mark.after(low, scan.newest if high is None else high, scan.next_page), scan

    def scan(
        self,
        webhook_id: str,
        low: float,
        page: int,
        result: SweepResult,
        budget: Budget,
        *,
        read_before: int = 0,
        only_status: int | None = None,
    ) -> _Scan:
        """Jobs of failed attempts from ``page`` down to ``low`` while ``budget`` lasts; a
        failing page ends the scan with its error, keeping what the pages before gave."""
        scan = _Scan(page)
        while scan.next_page is not None and not budget.spent(result.delivery_pages - read_before):
            try:
                listing = self._client.list_deliveries(
                    webhook_id,
                    status="failed",
                    page=scan.next_page,
                    page_size=self.settings.delivery_page_size,
                )
            except GeonodeError as exc:
                scan.error = exc
                break
            result.delivery_pages += 1
            scan.next_page = None if _take(scan, listing, low, only_status) else scan.next_page + 1
        scan.keys = list(dict.fromkeys(scan.keys))
        return scan

    def ensure(self, keys: Sequence[JobKey], source: str) -> int:
        """Ensure ``keys`` (``get_many`` reads them a hundred a BatchGetItem)."""
        return self._recoverer.ensure_many(keys, self._ledger.get_many(keys), source=source)
