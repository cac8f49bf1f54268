"""boto3 sessions that share one botocore loader, and so its parsed service models.

Each local stack has an endpoint of its own, which a session's clients read from
``AWS_ENDPOINT_URL`` when they are made: every stack makes a new session for itself and for
the handlers (boto3's default). A new botocore session parses the same JSON service models
again, tens of milliseconds a client, a dozen clients a stack, a few hundred stacks a test run.
The models do not change with the endpoint, so one loader serves every session of the process.
"""

from __future__ import annotations

import boto3
import botocore.loaders
import botocore.session

_MODELS = botocore.loaders.create_loader()


def new_session() -> boto3.session.Session:
    """A fresh boto3 session (credentials, region and endpoint read anew) on the shared models."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _MODELS)
    return boto3.session.Session(botocore_session=core)
