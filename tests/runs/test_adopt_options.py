"""Issue 35 item 4: an extract in doubt never adopts a job another run holds or one posted
with other options, judged from the simulator's record of jobs (which job has which formats
and rendering) against what each run's journal ends holding. The clock is the manual one."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scrape_pipeline.geonode.client import GeonodeClient
from scrape_pipeline.geonode.models import Job
from scrape_pipeline.geonode.retry import RetryPolicy
from scrape_pipeline.runs.doubt import Posted
from scrape_pipeline.runs.engine import Submitter
from scrape_pipeline.runs.journal import Journal
from scrape_pipeline.runs.pace import Pace
from scrape_pipeline.runs.plan import RunMode, RunSpec, post_options
from scrape_pipeline_local.clock import ManualClock
from scrape_pipeline_local.simulator import SimulatorServer
from tests.integration.test_client_simulator import KEY
from tests.runs.conftest import journal_of

URL = "https://example.com/adopt/page"


@pytest.fixture(params=["sqlite", "dynamodb"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Journal]:
    """The file's journal (every run's entries read), and the stack's (each job's ledger row
    asked which run holds it: moto on 127.0.0.1)."""
    with journal_of(request.param, request, tmp_path) as opened:
        yield opened


@pytest.fixture
def api(server: SimulatorServer, clock: ManualClock) -> Iterator[GeonodeClient]:
    """A client that leaves every retry to the submitter."""
    retry = RetryPolicy(max_attempts=1)
    with GeonodeClient(KEY, base_url=server.base_url, clock=clock, retry=retry) as client:
        yield client


def spec(formats: list[str], render_js: bool = False) -> RunSpec:
    return RunSpec.of([URL], RunMode.ASYNC, post_options(formats, render_js))


def submit(journal: Journal, api: GeonodeClient, clock: ManualClock, *a: Any) -> Any:
    return Submitter(journal, api, clock=clock, pace=Pace(clock), rng=random.Random(3)).submit(*a)


def created(server: SimulatorServer) -> dict[str, dict[str, Any]]:
    """The simulator's own record: every extract job of URL, by id."""
    jobs = server.sim.truth_jobs("extract")
    return {j["job_id"]: j for j in jobs if j["url"] == URL}


def the_job(server: SimulatorServer, formats: list[str]) -> str:
    [job_id] = [i for i, j in created(server).items() if j["formats"] == formats]
    return job_id


def test_an_extract_in_doubt_never_adopts_another_runs_job_of_other_formats(
    server: SimulatorServer, api: GeonodeClient, journal: Journal, clock: ManualClock
):
    # GIVEN run A posted URL for markdown and holds its job
    a = submit(journal, api, clock, spec(["markdown"]), "run-a")
    assert a.complete
    # WHEN a minute later run B posts the same URL for html and the API's answer is lost
    clock.advance(60)
    server.sim.faults.lose_answers("POST /v1/extract", [504])
    b = submit(journal, api, clock, spec(["html"]), "run-b")
    # THEN the API made one job each, and each run holds its own: B never took A's markdown job
    assert len(created(server)) == 2
    markdown, html = the_job(server, ["markdown"]), the_job(server, ["html"])
    assert [e.job_id for e in a.entries] == [markdown]
    assert [e.job_id for e in b.entries] == [html], "run B adopted run A's job"
    assert b.complete and b.posts == 1


def test_an_extract_in_doubt_never_adopts_another_runs_job_of_the_same_options(
    server: SimulatorServer, api: GeonodeClient, journal: Journal, clock: ManualClock
):
    # GIVEN run A holds the job of URL posted with the options run B posts too
    submit(journal, api, clock, spec(["markdown"]), "run-a")
    clock.advance(60)
    server.sim.faults.lose_answers("POST /v1/extract", [504])
    b = submit(journal, api, clock, spec(["markdown"]), "run-b")
    # THEN B adopted the job its own lost POST made (the later one), never A's
    jobs = created(server)
    assert len(jobs) == 2
    own = max(jobs, key=lambda i: jobs[i]["created_at"])
    assert [e.job_id for e in b.entries] == [own], "run B adopted run A's job"
    assert [e.job_id for e in journal.entries("run-a")] != [own]


def test_an_extract_in_doubt_never_adopts_a_job_rendered_otherwise(
    server: SimulatorServer, api: GeonodeClient, journal: Journal, clock: ManualClock
):
    # GIVEN someone outside every run posted URL for markdown with JavaScript rendered
    api.submit_extract(URL, formats=["markdown"], render_js=True)
    clock.advance(60)
    # WHEN a run posts URL for markdown, unrendered, and its answer is lost
    server.sim.faults.lose_answers("POST /v1/extract", [504])
    report = submit(journal, api, clock, spec(["markdown"]), "run-b")
    # THEN it adopted its own job, the unrendered one: the job list alone cannot tell them apart
    [own] = [i for i, j in created(server).items() if not j["render_js"]]
    assert [e.job_id for e in report.entries] == [own], "the run adopted a rendered job"


@pytest.mark.parametrize(
    ("metadata", "matches"),
    [
        ({"formats": ["html", "markdown"], "render_js": False, "processing_mode": "async"}, True),
        ({"formats": ["markdown"], "render_js": False, "processing_mode": "async"}, False),
        ({"formats": ["markdown", "html"], "render_js": True, "processing_mode": "async"}, False),
        ({"formats": ["markdown", "html"], "render_js": False, "processing_mode": "sync"}, False),
        ({"formats": ["markdown", "html"], "processing_mode": "async"}, False),  # not echoed
        ({"render_js": False, "processing_mode": "async"}, False),
    ],
)
def test_posted_matches_only_a_job_that_echoes_every_option_the_post_set(
    metadata: dict[str, Any], matches: bool
):
    # GIVEN a POST of markdown and html, unrendered; WHEN a job's answer says ``metadata``
    job = Job.from_api({"job_id": "j", "status": "queued", "metadata": metadata})
    # THEN it is that POST's job only when it echoes each option (any order of formats)
    assert Posted.of(post_options(["markdown", "html"], False)).matches(job) is matches
