"""The job-list checkpoint's durable format: rows round-trip, the pending list is bounded."""

from __future__ import annotations

from scrape_pipeline.geonode.listing_lag import LAG_MARGIN
from scrape_pipeline.reconciler.sweeps.job_list_state import MAX_PENDING_PASSES, CountStep
from scrape_pipeline.reconciler.sweeps.job_list_state import Checkpoint as _Checkpoint
from scrape_pipeline.reconciler.sweeps.job_list_state import Counted as _Counted
from scrape_pipeline.reconciler.sweeps.job_list_state import Pass as _Pass

EVERY = 600.0  # seconds between count checks in these tests


def test_checkpoint_round_trips_pending_passes():
    mark = _Checkpoint(500.0, [_Pass(10.0, 20.0, 3), _Pass(20.0, 30.0)])
    again = _Checkpoint.read(mark.fields(), default_watermark=0.0)
    assert again.watermark == 500.0
    assert [(p.start, p.end, p.page) for p in again.pending] == [(10.0, 20.0, 3), (20.0, 30.0, 1)]
    assert "pending" not in _Checkpoint(500.0).fields()


def test_checkpoint_merges_the_newest_passes_beyond_its_bound():
    # GIVEN one pending pass more than the bound
    passes = [_Pass(float(i), float(i + 1), 2) for i in range(MAX_PENDING_PASSES + 1)]
    mark = _Checkpoint(100.0, passes)
    # WHEN it is bounded
    mark.bound()
    # THEN the two newest became one pass read again from its first page
    assert len(mark.pending) == MAX_PENDING_PASSES
    merged = mark.pending[-1]
    last = float(MAX_PENDING_PASSES)
    assert (merged.start, merged.end, merged.page) == (last - 1, last + 1, 1)


def test_checkpoint_without_lag_reads_unconfirmed():
    # GIVEN a row saved with no lag measured and the overlap not confirmed
    saved = {"watermark": "500.000", "pending": "[[10.0,20.0,3]]"}
    # WHEN it is read
    mark = _Checkpoint.read(saved, default_watermark=0.0, now=1000.0)
    # THEN its watermark is where the next fresh pass starts, less the configured overlap
    assert (mark.watermark, mark.lag, mark.fresh_end, mark.confirmed) == (500.0, 0.0, 0.0, False)
    assert mark.overlap(30.0) == 30.0


def test_checkpoint_round_trips_the_measured_lag_and_forgets_it_after_a_day():
    mark = _Checkpoint(500.0)
    mark.measured(120.0, now=1000.0)
    mark.moved_at, mark.fresh_end = 900.0, 950.0
    again = _Checkpoint.read(mark.fields(), default_watermark=0.0, now=2000.0)
    assert (again.lag, again.moved_at, again.fresh_end) == (120.0, 900.0, 950.0)
    assert again.overlap(30.0) == LAG_MARGIN * 120.0
    later = _Checkpoint.read(mark.fields(), default_watermark=0.0, now=1000.0 + 86_401.0)
    assert later.lag == 0.0 and later.overlap(30.0) == 30.0


def test_checkpoint_round_trips_the_count_check_and_a_range_read_again():
    # GIVEN a checkpoint with a range read again for jobs listed late, and the last count
    late = _Pass(100.0, 400.0, 2, lag_from=350.0)
    counted = _Counted(80, 480, 12, ((300, 400.0), (480, 450.0)))
    mark = _Checkpoint(500.0, [late, _Pass(20.0, 30.0)], counted=counted, counted_at=1000.0)
    # WHEN it is saved and read back
    again = _Checkpoint.read(mark.fields(), default_watermark=0.0)
    # THEN the range keeps the watermark its lag samples are measured from, and the count
    # check compares with the same range and count
    assert [(p.start, p.end, p.page, p.lag_from) for p in again.pending] == [
        (100.0, 400.0, 2, 350.0),
        (20.0, 30.0, 1, None),
    ]
    assert (again.counted, again.counted_at) == (counted, 1000.0)


def passed(*created: float) -> _Pass:
    """A fresh pass read to its end that saw jobs ``created`` then."""
    read = _Pass(0.0, 0.0, done=True)
    read.seen = {f"j{i}": c for i, c in enumerate(created)}
    return read


def test_count_check_skipped_inside_its_interval_due_after_it():
    # GIVEN a range counted at t=1000 (Lambda's clock) up to 480
    mark = _Checkpoint(500.0, counted=_Counted(80, 480, 12, ((480, 450.0),)), counted_at=1000.0)
    # THEN a fresh pass from 470 within the interval extends the range without a page
    assert mark.count_step(1000.0 + EVERY - 60.0, 470, EVERY, deepest=0.0) is CountStep.EXTEND
    # AND once the interval has passed (a run a second early counts), it counts it again
    assert mark.count_step(1000.0 + EVERY - 1.0, 470, EVERY, deepest=0.0) is CountStep.RECOUNT
    # AND a range reaching below the deepest point is counted anew
    assert mark.count_step(1000.0 + EVERY, 470, EVERY, deepest=100.0) is CountStep.REBASE
    # AND a pass starting above the range's top (the overlap shrank) leaves no gap: it checks
    assert mark.count_step(1000.0 + 60.0, 490, EVERY, deepest=0.0) is CountStep.REBASE
    # AND a clock gone back checks rather than wait; nothing counted yet begins a range
    assert mark.count_step(900.0, 470, EVERY, deepest=0.0) is CountStep.RECOUNT
    assert _Checkpoint(500.0).count_step(0.0, 470, EVERY, deepest=0.0) is CountStep.BEGIN
    # AND 0 seconds between checks counts before every pass
    assert mark.count_step(1000.0, 470, 0.0, deepest=0.0) is CountStep.RECOUNT


def test_count_check_range_extended_across_skipped_passes_catches_a_job_listed_late():
    # GIVEN a first fresh pass from 1000 that saw three jobs, the next to start at 1100
    listed = [1000.0, 1050.5, 1090.0]
    counted = _Counted.begin(1000).after(passed(*listed), 1100.0, floor=0, watermark=1130.0)
    assert counted == _Counted(1000, 1100, 3, ((1100, 1130.0),))
    # AND two more passes inside the interval (no count asked) that saw two jobs each, the
    # job created at 1150 not listed yet when the second of them read past it
    counted = counted.after(passed(1095.0, 1120.0, 1160.0), 1170.0, floor=0, watermark=1200.0)
    counted = counted.after(passed(1175.0, 1190.0), 1230.0, floor=0, watermark=1260.0)
    listed += [1120.0, 1160.0, 1175.0, 1190.0]
    assert (counted.low, counted.top, counted.count) == (1000, 1230, len(listed))
    # WHEN the job created at 1150 is listed late (below every later pass's start), and the
    # check counts the range again after the interval
    listed.append(1150.0)
    recount = sum(counted.low <= c <= counted.top for c in listed)
    # THEN the count grew: the whole grown range is read again
    assert recount > counted.count
    again = counted.reread()
    assert (again.start, again.end) == (1000.0, 1230.0)
    # AND the job is a lag sample from the watermark of the pass that missed it (1200, its
    # part's), not the range's oldest (1130): the overlap widens to what it shows
    assert again.lag_base(1150.0) == 1200.0
    assert again.lag_base(1050.0) == 1130.0


def test_count_check_range_of_a_pass_cut_short_stays_and_an_empty_one_begins_at_the_floor():
    cut = _Pass(0.0, 0.0)  # not done
    counted = _Counted(80, 480, 12, ((480, 450.0),))
    assert counted.after(cut, 600.0, floor=0, watermark=700.0) is counted
    # A first range holds only the late window of what the pass saw (here from 1050 on)
    first = _Counted.begin(1000).after(passed(1010.0, 1060.0), 1100.0, floor=1050, watermark=1130.0)
    assert (first.low, first.top, first.count) == (1050, 1100, 1)
