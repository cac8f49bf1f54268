"""Webhook secrets published with the project: anyone who reads the repository can sign with them.

The sample events in ``events/`` are signed with these (``tests/support/sample_events.py``
builds them from here), and ``events/README.md`` prints the first. They are for the local stack
and ``sam local invoke`` only: a deployed receiver whose bundle holds one as a valid secret
verifies deliveries forged by anyone, so ``doctor`` fails it (``is_public_receiver``).
tests/cli/test_cli_doctor.py checks that every secret in events/ and the docs is listed here.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

# Public on purpose: events/webhook-valid.json and webhook-duplicate.json verify with it.
SAMPLE_SECRET = "whsec_dGVzdC1zZWNyZXQtZm9yLXVuaXQtdGVzdHMtb25seQ"  # noqa: S105 # nosec B105
# events/webhook-forged.json is signed with it: stored, the "forged" sample would verify.
SAMPLE_FORGED_SECRET = "whsec_not-the-secret"  # noqa: S105 - public # nosec B105
PUBLISHED_SECRETS: frozenset[str] = frozenset({SAMPLE_SECRET, SAMPLE_FORGED_SECRET})


def is_public_receiver(webhook_url: str | None) -> bool:
    """False only for a receiver on this machine's loopback (the local stack's): no one else
    can reach it with a forged delivery. An unknown URL counts as public."""
    if not webhook_url:
        return True
    host = urlsplit(webhook_url).hostname
    if host is None:
        return True
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: DNS decides where it points, so it may be anywhere
        return True
