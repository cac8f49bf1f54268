"""Webhook receiver Lambda: API Gateway (REST, binary media) -> verify -> ledger -> SQS.

Wiring only: the logic is ``receiver.webhook``, shared with the local stack and tests.
"""

from __future__ import annotations

import functools
import gc
import json
import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from scrape_pipeline.clock import active_clock
from scrape_pipeline.receiver.webhook import Receiver, answer_proxy, correlation_id
from scrape_pipeline.wiring.receiver import build_receiver

logger = Logger()
metrics = Metrics()
app = APIGatewayRestResolver()


@functools.cache
def get_receiver() -> Receiver:
    """The receiver, built once per container from the environment."""
    receiver = build_receiver(os.environ, clock=active_clock())
    # Everything built so far lives as long as the container: keep the collector from
    # rescanning it, which otherwise shows as millisecond spikes in the p99.
    gc.freeze()
    return receiver


# Forget the cached one (tests change the environment between cases).
reset_receiver = get_receiver.cache_clear


@app.post("/webhooks/<provider>")
def receive(provider: str) -> Response[str]:
    """One webhook delivery."""
    event = app.current_event
    headers = event.headers or {}
    if delivery_id := correlation_id(headers):
        logger.set_correlation_id(delivery_id)
    answer = answer_proxy(
        event.body,
        base64_encoded=event.is_base64_encoded,
        headers=headers,
        receiver=get_receiver,
    )
    metrics.add_metric(name=answer.outcome.metric, unit=MetricUnit.Count, value=1)
    log = logger.warning if answer.status >= 400 else logger.info
    log(
        "webhook",
        extra={
            "provider": provider,
            "outcome": answer.outcome,
            "status": answer.status,
            "reason": answer.reason,
            "kind": answer.job.kind.value if answer.job else None,
            "job_id": answer.job.job_id if answer.job else None,
        },
    )
    return Response(answer.status, content_types.APPLICATION_JSON, json.dumps(answer.body))


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """API Gateway proxy event in, proxy response out."""
    return app.resolve(event, context)
