"""``scrape-pipeline audit``: whether every job of a window ended where it should, judged
from the API's statuses and the results bucket's objects (never from the ledger's word).

    known      which batches and crawls (and, for ``--run``, which jobs) to read
    subjects   the jobs and items as the API reports them
    chains     for ``--run``: the jobs that carry a failed job's or item's work on
    objects    the bucket's key histories, by ListObjectVersions over whole prefixes
    verdicts   one verdict per job (``Verdict``), from the two
    report     counts, reasons, problems by name, and the calls it took
    run        the whole audit
"""

from scrape_pipeline_ops.audit.known import Known, of_run, of_window
from scrape_pipeline_ops.audit.report import AuditReport
from scrape_pipeline_ops.audit.run import DEFAULT_GRACE_S, Window, audit
from scrape_pipeline_ops.audit.verdicts import FAILING, Finding, Subject, Verdict

__all__ = [
    "DEFAULT_GRACE_S",
    "FAILING",
    "AuditReport",
    "Finding",
    "Known",
    "Subject",
    "Verdict",
    "Window",
    "audit",
    "of_run",
    "of_window",
]
