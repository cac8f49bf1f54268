"""Submission runs: every URL of a run posted once, whatever crashes, at the API's pace (the
submitter function's, and the CLI's ``submit``)."""
