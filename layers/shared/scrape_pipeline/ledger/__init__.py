"""The job ledger: one DynamoDB row per job, moved only by the conditional writes of
``lifecycle.MOVES``; one module per role, so the receiver loads ``intake`` alone."""
