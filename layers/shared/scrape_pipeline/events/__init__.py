"""Outcome events on the stack's EventBridge bus, delivered at least once through an outbox
(``detail``: what an event says, ``outbox``: PutEvents and the emitter)."""
