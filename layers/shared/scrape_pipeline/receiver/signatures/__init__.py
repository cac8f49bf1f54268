"""Webhook signature signing and verification: pure, standard library only (cold start).

``verify`` and ``scrape_pipeline_ops.signing.sign`` compute through one ``signing.mac``: what
doctor and the tests sign is by construction what the receiver checks. Every scheme is HMAC-SHA256::

    geonode (default)  X-Webhook-Signature: <prefix><hex|base64>
                       signed: body, or ts "." body with a timestamp header; key: secret UTF-8
    standard_webhooks  webhook-id, webhook-timestamp, webhook-signature: "v1,<b64> v1,<b64>"
                       signed: id "." ts "." body; key: base64 of the secret after "whsec_"
    stripe             Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>]  (v0 and others ignored)
                       signed: ts "." body; key: the whole secret string, UTF-8
    github             X-Hub-Signature-256: sha256=<hex>
                       signed: body; key: secret UTF-8

Only ``geonode`` is configurable (``SIGNATURE_*``): Geonode does not publish its format.
No message or repr here carries a secret, a received header value or a computed signature.
"""

from scrape_pipeline.receiver.signatures.config import (
    DEFAULT_TOLERANCE_SECONDS,
    Scheme,
    SignatureConfig,
)
from scrape_pipeline.receiver.signatures.secret import (
    SecretBundleError,
    WebhookSecret,
    WebhookSecrets,
    parse_secret_bundle,
)
from scrape_pipeline.receiver.signatures.signing import (
    FailureReason,
    NoValidSecretError,
    SignatureError,
    SignatureMismatchError,
    verify,
)

__all__ = [
    "DEFAULT_TOLERANCE_SECONDS",
    "FailureReason",
    "NoValidSecretError",
    "Scheme",
    "SecretBundleError",
    "SignatureConfig",
    "SignatureError",
    "SignatureMismatchError",
    "WebhookSecret",
    "WebhookSecrets",
    "parse_secret_bundle",
    "verify",
]
