"""The signature errors (drawn in ``scrape_pipeline.errors``); none carries a secret or a value."""

from __future__ import annotations

from typing import Literal

from scrape_pipeline.errors import PipelineError

FailureReason = Literal[
    "missing header",
    "malformed header",
    "timestamp outside tolerance",
    "no matching signature",
    "no valid secret",
]


class SignatureError(PipelineError):
    """Not authentically signed; ``reason`` is one short phrase, the message names headers at
    most (never their attacker-controlled values, a secret or an expected signature)."""

    def __init__(self, reason: FailureReason, detail: str = "") -> None:
        self.reason: FailureReason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


class SignatureMismatchError(SignatureError):
    """Well-formed and in time, but no active secret signed it (a rotation may explain it)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("no matching signature", detail)


class NoValidSecretError(SignatureError):
    """No unexpired, well-formed secret is configured: no request can pass, whatever it holds."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("no valid secret", detail)


class SecretBundleError(PipelineError, ValueError):
    """The stored secret bundle is malformed; the message names the position, never the content."""
