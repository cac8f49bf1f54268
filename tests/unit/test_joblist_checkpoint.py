"""The job-list checkpoint's durable format: old rows still read, the pending list bounded."""

from __future__ import annotations

from scrape_pipeline.sweeps.job_list_state import LAG_MARGIN, MAX_PENDING_PASSES
from scrape_pipeline.sweeps.job_list_state import Checkpoint as _Checkpoint
from scrape_pipeline.sweeps.job_list_state import Pass as _Pass


def test_checkpoint_reads_the_single_resumable_pass_of_earlier_versions():
    # GIVEN a row written before pending passes existed
    saved = {
        "watermark": "1000.000",
        "resume_start": "100.000",
        "resume_end": "900.000",
        "resume_page": "4",
        "resume_oldest": "",
    }
    # WHEN it is read
    mark = _Checkpoint.read(saved, default_watermark=0.0)
    # THEN its pass is pending, resumed at its page
    assert mark.watermark == 1000.0
    assert [(p.start, p.end, p.page) for p in mark.pending] == [(100.0, 900.0, 4)]


def test_checkpoint_round_trips_pending_passes():
    mark = _Checkpoint(500.0, [_Pass(10.0, 20.0, 3), _Pass(20.0, 30.0)])
    again = _Checkpoint.read(mark.fields(), default_watermark=0.0)
    assert again.watermark == 500.0
    assert [(p.start, p.end, p.page) for p in again.pending] == [(10.0, 20.0, 3), (20.0, 30.0, 1)]
    assert "pending" not in _Checkpoint(500.0).fields()


def test_checkpoint_reads_the_pinning_field_of_earlier_versions():
    # GIVEN a pending pass saved with the oldest unsettled job it had seen (no longer kept)
    saved = {"watermark": "500.000", "pending": "[[10.0,20.0,3,15.5],[20.0,30.0,1,null]]"}
    # THEN both passes resume where they were
    mark = _Checkpoint.read(saved, default_watermark=0.0)
    assert [(p.start, p.end, p.page) for p in mark.pending] == [(10.0, 20.0, 3), (20.0, 30.0, 1)]


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


def test_checkpoint_of_earlier_versions_reads_without_lag_and_unconfirmed():
    # GIVEN a row written before the watermark followed the API's timestamps
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
    mark = _Checkpoint(500.0, [late, _Pass(20.0, 30.0)], counted=(80, 480, 12, 450.0))
    # WHEN it is saved and read back
    again = _Checkpoint.read(mark.fields(), default_watermark=0.0)
    # THEN the range keeps the watermark its lag samples are measured from, and the count
    # check compares with the same range and count
    assert [(p.start, p.end, p.page, p.lag_from) for p in again.pending] == [
        (100.0, 400.0, 2, 350.0),
        (20.0, 30.0, 1, None),
    ]
    assert again.counted == (80, 480, 12, 450.0)
