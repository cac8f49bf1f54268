"""Webhook signature signing and verification: pure, small, standard library only.

The receiver Lambda imports this on every cold start, so it stays on the standard
library. ``verify`` and ``sign`` compute through one primitive (``schemes.mac``),
so what the simulator and tests sign is by construction what the receiver checks.

Schemes (``SIGNATURE_SCHEME``); every one is HMAC-SHA256::

    geonode (default)  X-Webhook-Signature: <prefix><hex|base64>
                       signed: body, or ts "." body with a timestamp header; key: secret UTF-8
    standard_webhooks  webhook-id, webhook-timestamp, webhook-signature: "v1,<b64> v1,<b64>"
                       signed: id "." ts "." body; key: base64 of the secret after "whsec_"
    stripe             Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>]  (v0 and others ignored)
                       signed: ts "." body; key: the whole secret string, UTF-8
    github             X-Hub-Signature-256: sha256=<hex>
                       signed: body; key: secret UTF-8

Only ``geonode`` is configurable (Geonode does not publish its header name,
encoding, prefix or signed timestamp); the other three are published formats
and are fixed.

Environment: the ``SIGNATURE_*`` settings are ``SignatureConfig``'s field declarations
(``config``; the README's configuration table is rendered from them). An empty value counts
as unset, because SAM parameters default to "".

Modules, one role each: ``config`` (the settings and their validation rules), ``secret``
(a secret and the stored bundle's model), ``bundle`` (the Secrets Manager value's parser),
``headers`` (reading header values), ``schemes`` (one class per scheme), ``signing``
(``sign`` and ``verify``), ``errors``.

Errors (``scrape_pipeline.errors`` draws the tree): every verification failure raises
``SignatureError`` with a short ``reason``; the two a receiver acts on have classes of their
own, ``SignatureMismatchError`` (no secret signed it: maybe one was just rotated) and
``NoValidSecretError`` (no usable secret is configured: ours to fix). A malformed stored
bundle raises ``SecretBundleError``, a bad ``SIGNATURE_*`` variable ``SettingsError``, both
``ValueError``s like the other configuration errors; programming errors raise ``TypeError``.
No message or repr here carries a secret, a received header value or a computed
signature.
"""

from scrape_pipeline.signatures.bundle import parse_secret_bundle
from scrape_pipeline.signatures.config import (
    DEFAULT_TOLERANCE_SECONDS,
    SCHEMES,
    Encoding,
    Scheme,
    SchemeName,
    SignatureConfig,
)
from scrape_pipeline.signatures.errors import (
    FailureReason,
    NoValidSecretError,
    SecretBundleError,
    SignatureError,
    SignatureMismatchError,
)
from scrape_pipeline.signatures.secret import WebhookSecret, WebhookSecrets
from scrape_pipeline.signatures.signing import sign, verify

__all__ = [
    "DEFAULT_TOLERANCE_SECONDS",
    "SCHEMES",
    "Encoding",
    "FailureReason",
    "NoValidSecretError",
    "Scheme",
    "SchemeName",
    "SecretBundleError",
    "SignatureConfig",
    "SignatureError",
    "SignatureMismatchError",
    "WebhookSecret",
    "WebhookSecrets",
    "parse_secret_bundle",
    "sign",
    "verify",
]
