"""The resumable-pass checkpoint codec: today's format round-trips, and every format of a pass
cut short that earlier versions saved (job list, delivery log) reads through ``migrate``."""

from __future__ import annotations

import pytest

from scrape_pipeline.sweeps import passes
from scrape_pipeline.sweeps.delivery_log import _DeliveryCheckpoint
from scrape_pipeline.sweeps.job_list_state import Checkpoint as _Checkpoint
from scrape_pipeline.sweeps.passes import SavedPass

# Each format a checkpoint row held in earlier versions, with the passes it means (oldest first).
OLD_FORMATS = {
    "job list, one resumable pass": (
        {
            "watermark": "1000.000",
            "resume_start": "100.000",
            "resume_end": "900.000",
            "resume_page": "4",
            "resume_oldest": "",
        },
        [SavedPass(100.0, 900.0, 4)],
    ),
    "job list, pending passes with the pinning job's time": (
        {"watermark": "500.000", "pending": "[[10.0,20.0,3,15.5],[20.0,30.0,1,null]]"},
        [SavedPass(10.0, 20.0, 3), SavedPass(20.0, 30.0, 1)],
    ),
    "job list, pending passes and the single pass beside them": (
        {
            "watermark": "500.000",
            "pending": "[[10.0,20.0,3]]",
            "resume_start": "30.000",
            "resume_end": "40.000",
            "resume_page": "2",
        },
        [SavedPass(10.0, 20.0, 3), SavedPass(30.0, 40.0, 2)],
    ),
    "delivery log, a pass cut short": (
        {"checkpoint": "500.000", "pass_low": "440.000", "pass_high": "900.000", "pass_page": "3"},
        [SavedPass(440.0, 900.0, 3)],
    ),
    "delivery log, no pass under way": ({"checkpoint": "500.000"}, []),
}


@pytest.mark.parametrize("name", list(OLD_FORMATS))
def test_each_old_format_reads_as_the_passes_it_saved(name: str):
    saved, meant = OLD_FORMATS[name]
    # WHEN the row is migrated THEN only today's field holds the passes, and they read as meant
    migrated = passes.migrate(saved)
    assert not {"resume_start", "resume_end", "resume_page", "resume_oldest"} & set(migrated)
    assert not {"pass_low", "pass_high", "pass_page"} & set(migrated)
    assert passes.decode(saved) == meant
    # AND written again in today's format they read the same
    assert passes.decode(passes.encode(meant)) == meant


def test_migrate_keeps_the_fields_that_are_not_a_pass():
    saved = {"checkpoint": "500.000", "pass_low": "1.000", "pass_high": "2.000", "pass_page": "3"}
    assert passes.migrate(saved) == {"checkpoint": "500.000", "pending": "[[1.0,2.0,3]]"}
    assert passes.migrate({"watermark": "5.000"}) == {"watermark": "5.000"}


def test_delivery_checkpoint_of_earlier_versions_resumes_its_pass():
    # GIVEN a subscription's row written by an earlier version, a pass cut short at page 3
    saved, _ = OLD_FORMATS["delivery log, a pass cut short"]
    # WHEN it is read
    mark = _DeliveryCheckpoint.read(saved, default=0.0)
    # THEN the pass resumes at its page, and the row is saved again in today's format
    assert (mark.checkpoint, mark.resume) == (500.0, SavedPass(440.0, 900.0, 3))
    assert mark.fields() == {"checkpoint": "500.000", "pending": "[[440.0,900.0,3]]"}
    assert _DeliveryCheckpoint.read(mark.fields(), default=0.0) == mark


def test_job_list_and_delivery_log_save_passes_in_one_format():
    # GIVEN the same pass cut short in each sweep's checkpoint
    job_list = _Checkpoint.read({"watermark": "1.000", "pending": "[[10.0,20.0,3]]"}, 0.0)
    delivery = _DeliveryCheckpoint(1.0, SavedPass(10.0, 20.0, 3))
    # THEN both rows hold it in the same field, the same way
    assert job_list.fields()["pending"] == delivery.fields()["pending"] == "[[10.0,20.0,3]]"


def test_a_range_read_again_keeps_its_lag_watermark_in_the_fifth_field():
    late = SavedPass(100.0, 400.0, 2, lag_from=350.0)
    assert late.encode() == [100.0, 400.0, 2, None, 350.0]
    assert passes.decode(passes.encode([late])) == [late]
