"""The resumable-pass checkpoint codec: passes cut short round-trip, in one format for the job
list and the delivery log."""

from __future__ import annotations

from scrape_pipeline.reconciler.sweeps import SavedPass, pending_field, saved_passes
from scrape_pipeline.reconciler.sweeps.delivery_log import _DeliveryCheckpoint
from scrape_pipeline.reconciler.sweeps.job_list_state import Checkpoint as _Checkpoint


def test_delivery_checkpoint_resumes_its_pass():
    # GIVEN a subscription's row saved with a pass cut short at page 3
    saved = {"checkpoint": "500.000", "pending": "[[440.0,900.0,3]]"}
    # WHEN it is read THEN the pass resumes at its page, and saves the same again
    mark = _DeliveryCheckpoint.read(saved, default=0.0)
    assert (mark.checkpoint, mark.resume) == (500.0, SavedPass(440.0, 900.0, 3))
    assert mark.fields() == saved
    assert _DeliveryCheckpoint.read({"checkpoint": "500.000"}, default=0.0).resume is None


def test_job_list_and_delivery_log_save_passes_in_one_format():
    # GIVEN the same pass cut short in each sweep's checkpoint
    job_list = _Checkpoint.read({"watermark": "1.000", "pending": "[[10.0,20.0,3]]"}, 0.0)
    delivery = _DeliveryCheckpoint(1.0, SavedPass(10.0, 20.0, 3))
    # THEN both rows hold it in the same field, the same way
    assert job_list.fields()["pending"] == delivery.fields()["pending"] == "[[10.0,20.0,3]]"


def test_a_range_read_again_keeps_its_lag_watermark_in_the_fifth_field():
    late = SavedPass(100.0, 400.0, 2, lag_from=350.0)
    assert late.encode() == [100.0, 400.0, 2, None, 350.0]
    assert saved_passes(pending_field([late])) == [late]
