"""The processor's failure paths: one job's GET failing for long, resubmission POSTs failing.

Each test is judged from outside: the simulator's record (submissions per URL, requests per
job) and the results bucket (objects and their versions), never the ledger's word.
"""

from __future__ import annotations

import pytest

from scrape_pipeline_local.simulator.faults import JobAnswer
from scrape_pipeline_local.stack import LocalStack, StackSettings
from tests.pipeline.conftest import MakeStack, check_exactly_once, outcome_keys, truth, versions
from tests.pipeline.test_long_tail import POST_JOB, s3_json, submit

GET_JOB = "GET /v1/extract/{job_id}"
HOUR = 3600.0
DAY = 86_400.0
STEP = 120.0


def gets(stack: LocalStack, job_id: str) -> int:
    """The GETs of ``job_id`` the simulator answered (or refused), by its own per-job record."""
    by_job: dict[str, dict[str, int]] = stack.sim.request_counts()["by_job"]
    return by_job.get(job_id, {}).get(GET_JOB, 0)


def stored(stack: LocalStack, job_id: str) -> bool:
    return outcome_keys(job_id)[0] in versions(stack)


# -- item 5: a job proven to exist is never closed on 404 alone ---------------------------------


def test_failing_get_404_past_the_bound_after_a_verified_webhook_is_stored_once(
    make_stack: MakeStack,
):
    # GIVEN quick jobs, one of which the API answers 404 to for half an hour after it was
    # created (far past the processor's 404 bound, about eight minutes), though its verified
    # webhook is delivered and the job list shows it
    stack = make_stack(job_duration_min_s=5, job_duration_max_s=10)
    lagging, healthy = submit(stack, 2, "lagging")
    stack.sim.faults.fail_job(lagging, answer=404, duration_s=1800.0)

    # WHEN an hour passes
    for _ in range(int(HOUR / 30)):
        stack.step(30.0)

    # THEN its webhook was answered 200, and it is stored once, never dead-lettered: not even
    # a record later retired (nothing could have reopened it)
    delivered = [a for a in stack.sim.delivery_attempts() if a["job_id"] == lagging]
    assert delivered and delivered[0]["http_status"] == 200
    seen = versions(stack)
    result, dead = outcome_keys(lagging)
    assert seen.get(result) == 1, "the job whose GET answered 404 for 30 min was never stored"
    assert dead not in seen
    assert stored(stack, healthy)
    # AND the re-checks were capped: far fewer GETs than one per retry interval
    assert gets(stack, lagging) <= 16, gets(stack, lagging)


# -- item 7: consecutive GET failures of one job are bounded ------------------------------------


@pytest.mark.parametrize("answer", [503, "timeout"])
def test_failing_get_for_hours_is_parked_polled_slowly_and_stored_on_recovery(
    make_stack: MakeStack, answer: JobAnswer
):
    # GIVEN two quick jobs, one of whose GET fails (503, or no answer at all) for six hours
    # while the other's succeeds
    stack = make_stack(job_duration_min_s=5, job_duration_max_s=10)
    sick, healthy = submit(stack, 2, "sick")
    stack.sim.faults.fail_job(sick, answer=answer, duration_s=6 * HOUR)

    # WHEN six hours pass (two-minute steps: the reconciler runs once a step)
    for _ in range(int(2 * HOUR / STEP)):
        stack.step(STEP)
    after_two_hours = gets(stack, sick)
    for _ in range(int(4 * HOUR / STEP)):
        stack.step(STEP)

    # THEN the healthy job was stored, and the sick one was polled ever more slowly: at most
    # two GETs an hour once it had failed for two hours (a retry every ten minutes is six)
    assert stored(stack, healthy)
    assert not stored(stack, sick)
    slow = gets(stack, sick) - after_two_hours
    assert slow <= 2 * 4, f"{slow} GETs in four hours of a job whose GET always fails"
    assert after_two_hours <= 16, after_two_hours

    # AND once its GET answers again it is stored once (within an hour's poll), nothing lost
    stack.run_until(lambda: stored(stack, sick), step=STEP, limit=1.5 * HOUR)
    assert versions(stack)[outcome_keys(sick)[0]] == 1
    assert check_exactly_once(stack) == {"stored": 2}


# -- item 6: the resubmission budget is per chain of failures, and a failed POST spends none ----


def always_failing(make_stack: MakeStack, budget: int) -> LocalStack:
    """Quick jobs that all fail retryably, ``budget`` resubmissions allowed per chain."""
    return make_stack(
        StackSettings(env={"MAX_RESUBMISSIONS_PER_URL": str(budget)}),
        retryable_failure_rate=1.0,
        job_duration_min_s=5,
        job_duration_max_s=10,
    )


def chain(stack: LocalStack, url: str) -> tuple[list[str], list[str]]:
    """The ids of ``url``'s jobs, oldest first, and of those with a dead-letter record."""
    jobs = sorted((j for j in truth(stack) if j["url"] == url), key=lambda j: j["created_at"])
    ids = [j["job_id"] for j in jobs]
    seen = versions(stack)
    return ids, [i for i in ids if outcome_keys(i)[1] in seen]


def test_failing_get_resubmission_budget_is_per_chain_not_per_url_for_life(
    make_stack: MakeStack,
):
    # GIVEN every extraction failing retryably, one resubmission allowed per chain of failures,
    # and a URL scraped once a day
    stack = always_failing(make_stack, budget=1)
    url = "https://example.com/daily"
    client = stack.client()

    def chain_ended(submissions: int) -> bool:
        ids, dead = chain(stack, url)
        return len(ids) == submissions and ids[-1] in dead

    # WHEN the first day's job fails, is resubmitted once and fails again (its chain ends)
    client.submit_extract(url)
    stack.run_until(lambda: chain_ended(2), step=5.0, limit=900)
    # AND a day later the URL is submitted again and its job fails too
    stack.step(DAY)
    client.submit_extract(url)
    stack.run_until(lambda: chain_ended(4) or chain_ended(3), step=5.0, limit=900)
    for _ in range(30):
        stack.step(30.0)

    # THEN the second day's failure got its own resubmission: 2 submissions a day, and only the
    # last job of each day's chain is dead-lettered (as over budget)
    assert stack.sim.submissions()[url] == 4, "the second day's failure got no resubmission"
    ids, dead = chain(stack, url)
    assert dead == [ids[1], ids[3]]
    assert s3_json(stack, outcome_keys(ids[3])[1])["reason"] == "resubmission budget spent"


def test_failing_get_resubmission_post_5xx_window_spends_no_budget(make_stack: MakeStack):
    # GIVEN every extraction failing retryably, two resubmissions per chain, and the API
    # answering every POST with 503 for 90 s right after the first submission
    stack = always_failing(make_stack, budget=2)
    url = "https://example.com/post-outage"
    first = stack.client().submit_extract(url).job_id
    stack.sim.faults.burst(duration_s=90.0, status=503, route=POST_JOB)

    # WHEN the pipeline runs for an hour
    for _ in range(int(HOUR / 10)):
        stack.step(10.0)

    # THEN the failed POSTs spent nothing: the chain had its two resubmissions (three jobs),
    # the first job is not dead-lettered, and only the chain's last one is, as over budget
    assert stack.sim.submissions()[url] == 3, "a POST-only outage spent the budget"
    ids, dead = chain(stack, url)
    assert ids[0] == first and dead == [ids[-1]]
    assert check_exactly_once(stack) == {"resubmitted": 2, "dead_lettered": 1}
