"""Outcome events on the stack's EventBridge bus, delivered at least once through an outbox.

    detail   what an event says (``DetailType``, ``OutcomeEvent``) and its stable ``event_id``
    bus      PutEvents, ten entries and 256 KB a call, reporting the entries refused
    outbox   the emitter: events put on the bus, then cleared from their rows

The write that moves a row to DONE also puts the outcome's event on the row (the outbox,
``scrape_pipeline.ledger.outbox``); the processor emits its batch's events at the batch's
end, and the reconciler's outbox sweep emits those a crash left behind, with the same id.
"""
