"""The watch sweep's listing checkpoint: where a run stops in the unsettled-job list."""

from __future__ import annotations

from datetime import UTC, datetime

from scrape_pipeline.geonode.models import JobSummary
from scrape_pipeline.reconciler.sweeps.watch_listing import Listed, Listing, pack, unpack


def jobs(*created: float) -> list[JobSummary]:
    return [
        JobSummary(
            raw={},
            job_id=f"j{i}",
            status="queued",
            url=None,
            created_at=datetime.fromtimestamp(c, UTC),
            execution_time=None,
            output=None,
        )
        for i, c in enumerate(created)
    ]


def test_listing_resumes_at_the_oldest_second_reached():
    # GIVEN two pages read under no bound, the oldest job at 1000.4
    listing = Listing(started=5.0)
    listing.turn(jobs(*[1200.0 - i for i in range(100)]))
    listing.turn(jobs(*[1100.0 - i for i in range(99)], 1000.4))
    # WHEN it is saved and read back
    again = Listing.read(listing.fields())
    # THEN the next run reads from that second (rounded up) on, its first page
    assert again is not None and (again.end, again.page) == (1001, 1)


def test_listing_of_one_crowded_second_goes_on_by_page():
    # GIVEN 250 jobs created in the same second, two pages of them read
    listing = Listing(started=5.0)
    listing.turn(jobs(*[1000.5] * 100))
    listing.turn(jobs(*[1000.5] * 100))
    # THEN the next run reads that second's third page: none of its jobs is skipped
    assert (Listing.read(listing.fields()) or listing).page == 3
    # AND a later save with no page read keeps the same place
    again = Listing.read(listing.fields())
    assert again is not None and (again.end, again.page) == (1001, 3)


def test_listed_ids_round_trip():
    # GIVEN a complete listing's ids THEN they round-trip through its own row
    ids = {b"12345678", b"abcdefgh"}
    assert unpack(pack(ids)) == ids
    listed = Listed(7.0, frozenset(ids), oversize=True)
    assert Listed.read(listed.fields()) == listed


def test_listing_of_the_next_status_starts_from_its_own_first_page():
    # GIVEN a run that read two pages of queued jobs of one second, then went on to the
    # processing ones and read one page of them
    listing = Listing(started=5.0)
    listing.turn(jobs(*[1000.5] * 100))
    listing.next_status()
    listing.turn(jobs(*[1000.5] * 100))
    # THEN the next run reads the processing jobs' second page (not one the queued counted)
    again = Listing.read(listing.fields())
    assert again is not None and (again.status, again.end, again.page) == (1, 1001, 2)
