"""Submission runs: every URL of a run posted once, whatever crashes, at the API's pace.

``plan`` (what a run is), ``moves`` (the journal entry's one move table), ``journal`` (the
``Journal`` protocol and the verbs every backend shares), ``dynamodb`` (the journal in the
ledger's table, for a stack), ``outcomes`` (what a POST's answer means), ``doubt`` (finding
the job a POST in doubt created), ``engine`` (the submitter), ``inside`` (one invocation of
the submitter function: a run file in the bucket, worked until its time is nearly up).

In the layer because the submitter function runs them (issue 19); the file journal the CLI
uses is ``scrape_pipeline_ops.runs.sqlite``.
"""
