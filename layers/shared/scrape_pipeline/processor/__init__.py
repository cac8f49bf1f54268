"""The processor: one job message to exactly one outcome, stored once in S3."""
