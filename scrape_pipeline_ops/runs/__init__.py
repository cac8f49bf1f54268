"""Submission runs: every URL of a run posted once, whatever crashes, at the API's pace.

``plan`` (what a run is), ``moves`` (the journal entry's one move table), ``journal`` (the
``Journal`` protocol and the verbs every backend shares), ``sqlite`` (the file journal),
``dynamodb`` (the journal in the ledger's table, for a stack), ``outcomes`` (what a POST's
answer means), ``engine`` (the submitter).

These modules import the runtime (``scrape_pipeline``) and the standard library only, never
the rest of ``scrape_pipeline_ops``: they belong in the Lambda layer once a function runs
submissions inside AWS (issue 19), and the layer ships only what a function imports
(``tests/packaging/test_layer_boundary.py``), so until then they live here.
"""
