"""The pipeline end to end on a manual clock: webhooks in, each result stored once."""

from __future__ import annotations

from tests.pipeline.conftest import MakeStack, all_settled_and_done, check_exactly_once, versions


def test_pipeline_stores_every_job_once_from_webhooks(make_stack: MakeStack):
    stack = make_stack()
    client = stack.client()
    ids = [
        client.submit_extract(f"https://example.com/p{i}", formats=["markdown", "html"]).job_id
        for i in range(20)
    ]

    stack.run_until(all_settled_and_done(stack, 20), step=1.0, limit=600)

    tally = check_exactly_once(stack)
    assert tally == {"stored": 20}
    seen = versions(stack)
    for job_id in ids:
        assert f"results/extract/{job_id}/content.md" in seen
        assert f"results/extract/{job_id}/content.html" in seen
    assert stack.front is not None and stack.front.invocations >= 20
