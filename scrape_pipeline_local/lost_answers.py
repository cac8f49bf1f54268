"""Lost POST answers in the demo: lost on the pipeline's own POSTs only, judged from outside.

A profile's ``lost_answer_rate`` of the job-creating POSTs made while the stack steps (the runs'
submitter, the processor's resubmissions and item retries) create their job and lose the
answer (a 504, or none). Never the demo's own direct POSTs: nobody but the demo could resolve
those. The figures come from the simulator's record and the run journal, not the ledger: POSTs
per URL (URLs retried for their own failure aside) and how long each run entry whose first POST
lost its answer stayed in doubt, from that POST to the first step whose journal names its job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from scrape_pipeline_local.bus_record import percentile
from scrape_pipeline_local.simulator.faults import Faults, LostAnswer


@dataclass
class LostAnswerFigures:
    """What the lost answers came to, by the simulator's record and the run journal."""

    lost: int = 0  # answers lost, on every path
    in_runs: int = 0  # of those, a run's first POST of its URLs: the ones timed
    unadopted: int = 0  # of those, whose job the journal never named
    # POSTs -> how many URLs were posted that often (URLs retried for their own failure aside).
    posts_per_url: Counter[int] = field(default_factory=Counter)
    doubt: list[float] = field(default_factory=list)  # seconds, lost POST to journal's job id

    @property
    def posts_max(self) -> int:
        return max(self.posts_per_url, default=0)

    @property
    def posted_again(self) -> int:
        return sum(n for posts, n in self.posts_per_url.items() if posts > 1)

    @property
    def doubt_p50(self) -> float:
        return percentile(self.doubt, 50)

    @property
    def doubt_max(self) -> float:
        return max(self.doubt, default=0.0)

    @property
    def failed(self) -> bool:
        """Answers were lost and a URL was posted twice, or a lost one never adopted."""
        return bool(self.lost) and (self.posts_max > 1 or self.unadopted > 0)

    def rows(self) -> list[tuple[str, str]]:
        """The report's rows (none when no answer was lost)."""
        if not self.lost:
            return []
        spread = ", ".join(f"{n} URLs x{posts}" for posts, n in sorted(self.posts_per_url.items()))
        return [
            ("POST answers lost (all paths / runs' first POSTs)", f"{self.lost} / {self.in_runs}"),
            ("POSTs per URL (not retried for its own failure)", spread),
            ("URLS POSTED MORE THAN ONCE", str(self.posted_again)),
            (
                "in doubt, lost POST to the journal's job p50 / max",
                f"{self.doubt_p50:.0f} s / {self.doubt_max:.0f} s",
            ),
            ("LOST ANSWERS NEVER ADOPTED", str(self.unadopted)),
        ]


class LostAnswers:
    """Arms the simulator's lost answers around the stack's steps and times their doubt."""

    def __init__(self, faults: Faults, rate: float, run_urls: Collection[str]) -> None:
        self._faults = faults
        self._rate = rate
        self._run_urls = frozenset(run_urls)
        self._adopted_at: dict[str, float] = {}  # job id -> when the journal first named it

    @contextmanager
    def armed(self) -> Iterator[None]:
        """Lose answers while the pipeline posts; the demo's own POSTs happen outside this."""
        if not self._rate:
            yield
            return
        self._faults.lose_answers_at(self._rate)
        try:
            yield
        finally:
            self._faults.lose_answers_at(0.0)

    def _timed(self) -> list[LostAnswer]:
        """The lost answers of a run's first POST of its URLs: the submitter's own."""
        return [
            lost
            for lost in self._faults.lost_answers()
            if lost.first_post and lost.job_id and lost.urls and set(lost.urls) <= self._run_urls
        ]

    def follow(self, journal_jobs: Callable[[], set[str]], at: float) -> None:
        """Note when the journal first names each timed lost answer's job (read only while one
        is still unnamed); ``at``: the clock during the step that wrote it."""
        waiting = [lost for lost in self._timed() if lost.job_id not in self._adopted_at]
        if not waiting:
            return
        named = journal_jobs()
        for lost in waiting:
            if lost.job_id in named:
                self._adopted_at[str(lost.job_id)] = at

    def figures(
        self, submissions: Mapping[str, int], truth_jobs: Iterable[Mapping[str, Any]]
    ) -> LostAnswerFigures:
        """POSTs per URL from the simulator's record, and each timed lost answer's doubt."""
        retried = {
            str(job["url"])
            for job in truth_jobs
            if job["status"] == "failed" and bool(job.get("retryable"))
        }
        timed = self._timed()
        found = LostAnswerFigures(lost=len(self._faults.lost_answers()), in_runs=len(timed))
        found.posts_per_url = Counter(n for url, n in submissions.items() if url not in retried)
        for lost in timed:
            adopted = self._adopted_at.get(str(lost.job_id))
            if adopted is None:
                found.unadopted += 1
            else:
                found.doubt.append(adopted - lost.at)
        return found
