"""Big batches and crawls, cancelled ones, and pages the API does not number, end to end.

A batch or crawl too big for one invocation is stored across many, some killed mid-page: it
must complete, each page stored once, never taken for poison. No page is started that the
invocation cannot finish. A cancelled crawl or batch is closed only once its in-flight items
have drained, and those are stored. A page answer without ``page`` is still read in order.
Judged from S3's object versions and the simulator's record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest

from scrape_pipeline.jobs import JobKey, JobKind, Outcome
from scrape_pipeline.ledger.full import Ledger
from scrape_pipeline.processor.deadline import Deadline
from scrape_pipeline.processor.processing import JobProcessor
from scrape_pipeline.processor.queue import JobMessage, JobQueue
from scrape_pipeline.processor.settings import ProcessorSettings
from scrape_pipeline_local.stack import LocalStack, StackSettings
from scrape_pipeline_ops.submissions import expect
from tests.pipeline.conftest import MakeStack, truth, versions

PAGE = 50  # the processor's page of items
LEASE_SECONDS = ProcessorSettings().lease_seconds
GET_ROUTE = {"crawl": "GET /v1/crawl/{crawl_id}", "batch": "GET /v1/batch/{batch_id}"}


class Killed(BaseException):
    """The invocation dies here (a timeout): no ``except Exception`` runs, nothing is released."""


def ledger(stack: LocalStack) -> Ledger:
    assert stack.resources is not None
    return Ledger(stack.resources.table, client=boto3.client("dynamodb"), clock=stack.clock)


def processor(stack: LocalStack) -> JobProcessor:
    job_processor: JobProcessor = stack.handlers["processor"].get_processor()[0]
    return job_processor


def gets(stack: LocalStack, kind: str) -> int:
    return int(stack.sim.request_counts()["by_route"].get(GET_ROUTE[kind], 0))


def stored_items(stack: LocalStack, kind: str, job_id: str) -> dict[str, int]:
    """Each stored item's metadata object and its number of versions."""
    prefix = f"results/{kind}/{job_id}/"
    return {k: n for k, n in versions(stack).items() if k.startswith(prefix) and "metadata" in k}


def completed_indexes(stack: LocalStack, kind: str, job_id: str) -> set[int]:
    """The items the simulator completed."""
    sim_kind = {"crawl": "crawl_page", "batch": "batch_item"}[kind]
    return {
        int(j["index"])
        for j in truth(stack, sim_kind)
        if j["job_id"] == job_id and j["status"] == "completed"
    }


def settled_crawl(stack: LocalStack, url: str, pages: int) -> str:
    """A crawl of ``pages`` pages, every one completed, that only the test will process."""
    stack.sim.faults.update(drop_rate=1.0)
    crawl_id = stack.client().create_crawl(url, max_pages=pages).job_id
    stack.run_until(
        lambda: all(p["status"] == "completed" for p in truth(stack, "crawl_page")), step=30.0
    )
    return crawl_id


def check_every_item_stored_once(stack: LocalStack, kind: str, job_id: str) -> None:
    seen = versions(stack)
    assert max(seen.values(), default=1) == 1, [k for k, n in seen.items() if n > 1]
    assert not [k for k in seen if k.startswith("dead-letters/")]
    expected = {
        f"results/{kind}/{job_id}/{i:05d}/metadata.json"
        for i in completed_indexes(stack, kind, job_id)
    }
    assert expected and set(stored_items(stack, kind, job_id)) == expected


def kill_every_attempt(job_processor: JobProcessor, after_items: int) -> list[int]:
    """Each attempt dies after storing ``after_items`` items (mid-page); returns the kills."""
    kills: list[int] = []
    stores = [0]
    real_process, real_store = job_processor.process, job_processor._results.store

    def process(message: JobMessage, **kwargs: Any) -> Any:
        stores[0] = 0
        return real_process(message, **kwargs)

    def store(*args: Any, **kwargs: Any) -> Any:
        if stores[0] == after_items:
            kills.append(after_items)
            raise Killed
        stores[0] += 1
        return real_store(*args, **kwargs)

    job_processor.process = process  # type: ignore[method-assign]
    job_processor._results.store = store  # type: ignore[method-assign]
    return kills


# -- a big job across invocations killed mid-page ------------------------------------------


def test_big_crawl_killed_mid_page_on_every_invocation_completes_never_poisoned(
    make_stack: MakeStack,
):
    # GIVEN a 150-page crawl (3 pages of 50) and a bound of 1 strike; every invocation is
    # killed by its timeout in the middle of its second page, after storing the first
    stack = make_stack(
        StackSettings(env={"MAX_ATTEMPTS": "1"}),
        crawl_page_duration_min_s=0.5,
        crawl_page_duration_max_s=1.0,
        crawl_concurrency=50,
    )
    kills = kill_every_attempt(processor(stack), after_items=PAGE + 10)
    crawl_id = stack.client().create_crawl("https://example.com/big", max_pages=150).job_id

    # WHEN the pipeline runs until every page is stored, or the crawl is dead-lettered
    def finished() -> bool:
        seen = versions(stack)
        dead = any(k.startswith(f"dead-letters/crawl/{crawl_id}") for k in seen)
        return dead or len(stored_items(stack, "crawl", crawl_id)) == 150

    stack.run_until(finished, step=20.0, limit=3600)

    # THEN two invocations were killed, each after storing a page: progress, not strikes,
    # so the crawl completed with every page stored once and nothing dead-lettered
    assert len(kills) == 2
    check_every_item_stored_once(stack, "crawl", crawl_id)
    row = ledger(stack).get(JobKey(JobKind.CRAWL, crawl_id))
    assert row is not None and row.outcome is Outcome.STORED


# -- no page started that cannot finish --------------------------------------------------------


class FakeInvocation:
    """An invocation's remaining time, spent only by the S3 writes of the items stored."""

    def __init__(self, job_processor: JobProcessor, seconds_per_item: float) -> None:
        self.left = 0.0
        self.killed = 0
        real_store = job_processor._results.store

        def store(*args: Any, **kwargs: Any) -> Any:
            self.left -= seconds_per_item
            if self.left < 0:
                self.killed += 1
                raise Killed
            return real_store(*args, **kwargs)

        job_processor._results.store = store  # type: ignore[method-assign]

    def start(self, length: float, used: float = 0.0) -> Deadline:
        """A new invocation of ``length`` seconds, ``used`` of them already spent."""
        self.left = length
        deadline = Deadline.of_invocation(lambda: self.left, 10.0)
        self.left -= used
        return deadline


def test_processor_starts_no_page_it_cannot_finish_first_page_included(make_stack: MakeStack):
    # GIVEN a settled 300-page crawl (6 pages) whose pages take 25 s each to store (0.5 s an
    # item), and a stop margin of 10 s
    stack = make_stack(crawl_page_duration_min_s=0.5, crawl_page_duration_max_s=1.0)
    stack.sim.faults.update(drop_rate=1.0)  # the test alone drives the processor
    crawl_id = stack.client().create_crawl("https://example.com/timed", max_pages=300).job_id
    stack.run_until(
        lambda: all(p["status"] == "completed" for p in truth(stack, "crawl_page")), step=30.0
    )
    job_processor = processor(stack)
    invocation = FakeInvocation(job_processor, seconds_per_item=0.5)
    message = JobMessage(JobKey(JobKind.CRAWL, crawl_id), "test")

    # WHEN a 110 s invocation processes it: after each page, another one fits only while
    # 10 s + 1.5 x 25 s are left, so it stops with 35 s left after 3 pages (past the stop
    # margin alone it would have started a fifth page with 10 s left)
    first = job_processor.process(message, deadline=invocation.start(110.0))
    after_first = len(stored_items(stack, "crawl", crawl_id)), gets(stack, "crawl")

    # AND a later invocation, with 15 s left when the job comes up, does not start the next
    # page (the last attempt timed it at 25 s): no GET, nothing written
    second = job_processor.process(message, deadline=invocation.start(110.0, used=95.0))
    after_second = len(stored_items(stack, "crawl", crawl_id)), gets(stack, "crawl")

    # AND a fresh invocation stores the rest
    third = job_processor.process(message, deadline=invocation.start(110.0))

    # THEN no page was killed mid-way, and each page was read once
    assert invocation.killed == 0
    assert (first.outcome, after_first) == ("in_progress", (3 * PAGE, 3))
    assert (second.outcome, after_second) == ("in_progress", after_first)
    assert third.outcome == "stored"
    assert gets(stack, "crawl") == 6
    check_every_item_stored_once(stack, "crawl", crawl_id)


def test_a_page_longer_than_any_invocation_is_still_tried_at_the_start_of_one(
    make_stack: MakeStack,
):
    # GIVEN pages timed at 50 s by an earlier attempt and invocations of 60 s: 10 s + 1.5 x
    # 50 s never fits, yet never starting would loop for ever
    stack = make_stack(crawl_page_duration_min_s=0.5, crawl_page_duration_max_s=1.0)
    crawl_id = settled_crawl(stack, "https://example.com/slow", 100)
    job_processor = processor(stack)
    invocation = FakeInvocation(job_processor, seconds_per_item=1.0)
    message = JobMessage(JobKey(JobKind.CRAWL, crawl_id), "test")

    # WHEN fresh invocations process it
    outcomes = [job_processor.process(message, deadline=invocation.start(60.0)).outcome]
    outcomes.append(job_processor.process(message, deadline=invocation.start(60.0)).outcome)

    # THEN each stored one page, the first page of a fresh invocation
    assert outcomes == ["in_progress", "stored"] and invocation.killed == 0
    check_every_item_stored_once(stack, "crawl", crawl_id)


def test_a_page_longer_than_the_whole_invocation_is_stored_across_attempts_never_poisoned(
    make_stack: MakeStack,
):
    # GIVEN a settled crawl of one page of 50 items that takes 50 s to store (1 s an item),
    # invocations of 20 s (a 5 s margin) and a bound of 2 strikes: no invocation can hold
    # the page (seen in chaos `timeouts` at 1,000 jobs: a 2 s processor, 50-item pages on a
    # loaded machine; the batch was dead-lettered with its first items stored, both)
    stack = make_stack(
        StackSettings(env={"MAX_ATTEMPTS": "2"}),
        crawl_page_duration_min_s=0.5,
        crawl_page_duration_max_s=1.0,
    )
    crawl_id = settled_crawl(stack, "https://example.com/huge", PAGE)
    job_processor = processor(stack)
    invocation = FakeInvocation(job_processor, seconds_per_item=1.0)
    message = JobMessage(JobKey(JobKind.CRAWL, crawl_id), "test")

    # WHEN fresh invocations process it, each one killed by its timeout if it runs out
    outcomes = []
    for _ in range(6):
        try:
            outcome: str = job_processor.process(message, deadline=invocation.start(20.0)).outcome
        except Killed:
            outcome = "killed"
            stack.clock.advance(LEASE_SECONDS + 1)  # the dead attempt's lease runs out
        outcomes.append(outcome)
        if outcome not in ("in_progress", "killed"):
            break

    # THEN each attempt stored the items it had time for and stopped at its margin, the next
    # going on from there: every item stored once, none dead-lettered, never killed
    assert invocation.killed == 0, outcomes
    assert outcomes[-1] == "stored", outcomes
    check_every_item_stored_once(stack, "crawl", crawl_id)


# -- pages the API does not number ---------------------------------------------------------------


def test_batch_pages_answered_without_page_are_read_in_order_once_each(make_stack: MakeStack):
    # GIVEN a 120-URL batch (3 pages) whose page answers leave out ``page``
    stack = make_stack(StackSettings(processor_timeout=5.0))
    stack.sim.faults.update(omit_page=True)
    urls = [f"https://example.com/unnumbered/{i}" for i in range(120)]
    batch_id = stack.client().create_batch(urls).job_id

    # WHEN the pipeline runs until they are all stored (or the GETs run away)
    def finished() -> bool:
        return len(stored_items(stack, "batch", batch_id)) == 120 or gets(stack, "batch") > 30

    stack.run_until(finished, step=5.0, limit=1800)

    # THEN each item is stored once, pages read in order: three GETs, page 2 not for ever
    check_every_item_stored_once(stack, "batch", batch_id)
    assert gets(stack, "batch") == 3


# -- cancelled while items are in flight ---------------------------------------------------------


Cancel = Callable[[LocalStack, str], Any]


def cancel_crawl(stack: LocalStack, crawl_id: str) -> Any:
    return stack.client().cancel_crawl(crawl_id)


def cancel_batch(stack: LocalStack, batch_id: str) -> Any:
    return stack.sim.cancel_batch(batch_id)  # a fault-control hook: the API has no such route


@pytest.mark.parametrize(
    ("kind", "cancel"), [("crawl", cancel_crawl), ("batch", cancel_batch)], ids=["crawl", "batch"]
)
def test_cancelled_job_is_closed_only_after_its_in_flight_items_drain(
    make_stack: MakeStack, kind: str, cancel: Cancel
):
    # GIVEN a 40-page crawl (4 pages in flight at a time, 60-70 s each) or a 40-URL batch (its
    # items running from 25 s to 100-120 s), announced at submission
    stack = make_stack(
        crawl_page_duration_min_s=60,
        crawl_page_duration_max_s=70,
        job_duration_min_s=100,
        job_duration_max_s=120,
    )
    client = stack.client()
    if kind == "crawl":
        job_id = client.create_crawl("https://example.com/cancelled", max_pages=40).job_id
    else:
        urls = [f"https://example.com/cancelled/{i}" for i in range(40)]
        job_id = client.create_batch(urls).job_id
    job_kind = JobKind(kind)
    books = ledger(stack)
    expect(books, job_kind, job_id)
    stack.step(45.0)

    # WHEN it is cancelled while items run, and the processor looks at once (the API answers
    # "cancelled" already; the in-flight items drain for another minute or more)
    cancel(stack, job_id)
    sim_kind = {"crawl": "crawl_page", "batch": "batch_item"}[kind]
    in_flight = [
        j for j in truth(stack, sim_kind) if j["job_id"] == job_id and j["status"] == "processing"
    ]
    assert in_flight, "nothing was in flight at the cancel"
    drained_at = max(float(j["settled_at"]) for j in in_flight)
    assert stack.resources is not None
    JobQueue(stack.resources.queue_url, client=boto3.client("sqs")).send(
        JobMessage(JobKey(job_kind, job_id), "test")
    )

    def closed() -> bool:
        row = books.get(JobKey(job_kind, job_id))
        return row is not None and row.is_done

    stack.run_until(closed, step=5.0, limit=1800)
    for _ in range(10):  # the webhook after the drain, and anything late, find it closed
        stack.step(30.0)

    # THEN it was closed cancelled only after the drain, and every item the API completed,
    # the drained ones included, is stored once
    assert completed_indexes(stack, kind, job_id) >= {int(j["index"]) for j in in_flight}
    check_every_item_stored_once(stack, kind, job_id)
    row = books.get(JobKey(job_kind, job_id))
    assert row is not None and row.outcome is Outcome.CANCELLED
    assert row.finished_at is not None and row.finished_at >= drained_at
