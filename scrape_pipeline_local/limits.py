"""The AWS payload quotas the local stack enforces, in one place.

Both are hard quotas (not adjustable). Sizes are of the bytes on the wire: the HTTP request
body for API Gateway, the event's JSON for Lambda.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# API Gateway quota "Payload size" for REST APIs: 10 MB. A larger request body gets 413 and
# never reaches the integration.
API_GATEWAY_MAX_PAYLOAD_BYTES = 10 * 1024 * 1024

# Lambda quota "Invocation payload (request and response)": 6 MB each for synchronous
# invocations (API Gateway proxy integrations and SQS event source mappings invoke
# synchronously). With ``BinaryMediaTypes: */*`` the body is base64 inside the event, 4/3 larger.
LAMBDA_SYNC_MAX_PAYLOAD_BYTES = 6 * 1024 * 1024


def event_bytes(event: Mapping[str, Any]) -> int:
    """The size Lambda counts for an event: its JSON, UTF-8 encoded."""
    return len(json.dumps(event).encode())
