"""The webhook receiver: verify a delivery's signature, record its job once, enqueue it."""
