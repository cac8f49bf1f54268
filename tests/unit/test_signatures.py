"""Unit tests for receiver.signatures: published vectors, round trips, every failure."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any, get_args

import pytest

from scrape_pipeline.config.settings import SettingsError
from scrape_pipeline.receiver.signatures.config import Scheme, SignatureConfig
from scrape_pipeline.receiver.signatures.secret import (
    SecretBundleError,
    WebhookSecret,
    parse_secret_bundle,
)
from scrape_pipeline.receiver.signatures.signing import (
    FailureReason,
    NoValidSecretError,
    SignatureError,
    SignatureMismatchError,
    verify,
)
from scrape_pipeline_ops.signing import sign

NOW = 1_700_000_000.0
BODY = b'{"event": "extract_completed", "data": {"job_id": "j-1", "status": "completed"}}'
GEONODE_SECRET = "whsec_geonode-test-secret-0123456789"
# Standard Webhooks secrets are base64 after the prefix (this one: 24 random-looking bytes).
SW_SECRET = "whsec_" + base64.b64encode(b"standard-webhooks-key-01").decode()
OTHER_SW_SECRET = "whsec_" + base64.b64encode(b"another-standard-key-002").decode()

GEONODE = SignatureConfig()
GEONODE_FULL = SignatureConfig(
    header="X-Geo-Sig", encoding="base64", prefix="v1=", timestamp_header="X-Geo-Timestamp"
)
STANDARD = SignatureConfig(scheme=Scheme.STANDARD_WEBHOOKS)
STRIPE = SignatureConfig(scheme=Scheme.STRIPE)
GITHUB = SignatureConfig(scheme=Scheme.GITHUB)

CONFIGS = {
    "geonode": GEONODE,
    "geonode_full": GEONODE_FULL,
    "standard_webhooks": STANDARD,
    "stripe": STRIPE,
    "github": GITHUB,
}
TIMESTAMPED = ["geonode_full", "standard_webhooks", "stripe"]


def secret_for(config: SignatureConfig) -> str:
    return SW_SECRET if config.scheme == "standard_webhooks" else GEONODE_SECRET


def other_secret_for(config: SignatureConfig) -> str:
    return OTHER_SW_SECRET if config.scheme == "standard_webhooks" else "whsec_some-other-secret"


def signed(config: SignatureConfig, body: bytes = BODY, at: float = NOW) -> dict[str, str]:
    return sign(config, body, secret_for(config), at, msg_id="msg_1")


def reason_of(
    config: SignatureConfig,
    headers: dict[str, Any],
    body: bytes = BODY,
    secrets: list[WebhookSecret] | None = None,
    now: float = NOW,
) -> FailureReason:
    keys = secrets if secrets is not None else [WebhookSecret(secret_for(config))]
    with pytest.raises(SignatureError) as caught:
        verify(config, headers, body, keys, now)
    return caught.value.reason


# --- published vectors ------------------------------------------------------------------------

# standard-webhooks/standard-webhooks, libraries/python/tests/test_webhooks.py::test_sign_function
# (the same vector appears in the Svix libraries and the spec's other language libraries).
SW_VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SW_VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SW_VECTOR_TS = 1614265330
SW_VECTOR_BODY = b'{"test": 2432232314}'
SW_VECTOR_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

# docs.github.com, "Validating webhook deliveries", "Testing the webhook payload validation".
GH_VECTOR_SECRET = "It's a Secret to Everybody"
GH_VECTOR_BODY = b"Hello, World!"
GH_VECTOR_SIG = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_sign_standard_webhooks_reproduces_published_vector() -> None:
    headers = sign(STANDARD, SW_VECTOR_BODY, SW_VECTOR_SECRET, SW_VECTOR_TS, msg_id=SW_VECTOR_ID)

    assert headers == {
        "webhook-id": SW_VECTOR_ID,
        "webhook-timestamp": str(SW_VECTOR_TS),
        "webhook-signature": SW_VECTOR_SIG,
    }


def test_verify_standard_webhooks_accepts_published_vector() -> None:
    headers = {
        "webhook-id": SW_VECTOR_ID,
        "webhook-timestamp": str(SW_VECTOR_TS),
        "webhook-signature": SW_VECTOR_SIG,
    }

    verify(STANDARD, headers, SW_VECTOR_BODY, [WebhookSecret(SW_VECTOR_SECRET)], SW_VECTOR_TS)


def test_verify_standard_webhooks_accepts_unprefixed_and_unpadded_secret() -> None:
    # GIVEN the vector's secret without "whsec_" (the reference library accepts both forms)
    headers = sign(STANDARD, SW_VECTOR_BODY, SW_VECTOR_SECRET, SW_VECTOR_TS, msg_id=SW_VECTOR_ID)
    bare = SW_VECTOR_SECRET.removeprefix("whsec_")
    unpadded = "whsec_" + base64.b64encode(b"sixteen byte key").decode().rstrip("=")

    # WHEN / THEN both verify, and an unpadded secret signs and verifies
    verify(STANDARD, headers, SW_VECTOR_BODY, [WebhookSecret(bare)], SW_VECTOR_TS)
    again = sign(STANDARD, b"x", unpadded, NOW, msg_id="m")
    verify(STANDARD, again, b"x", [WebhookSecret(unpadded)], NOW)


def test_sign_github_reproduces_documented_example() -> None:
    headers = sign(GITHUB, GH_VECTOR_BODY, GH_VECTOR_SECRET, NOW)

    assert headers == {"X-Hub-Signature-256": GH_VECTOR_SIG}


def test_verify_github_accepts_documented_example() -> None:
    headers = {"X-Hub-Signature-256": GH_VECTOR_SIG}

    verify(GITHUB, headers, GH_VECTOR_BODY, [WebhookSecret(GH_VECTOR_SECRET)], NOW)


def test_verify_stripe_accepts_independent_vector() -> None:
    # Stripe publishes no fixed (secret, payload, signature) triple: its docs show a
    # header without the secret, and stripe-python's tests sign with the library's own
    # _compute_signature at time.time(). This vector is from an independent
    # implementation, typeclasses/stripe (stripe-signature/test/test.hs):
    # HMAC-SHA256("secret", "123.hello") = f89c0a0e...
    header = "t=123,v1=f89c0a0e96fa6304a7ebd5ecaf13bc1beb859577cd7cafb7bdbc43c3bc2f6afa"

    verify(STRIPE, {"Stripe-Signature": header}, b"hello", [WebhookSecret("secret")], 123)


def test_sign_stripe_matches_stripe_python_construction() -> None:
    # GIVEN stripe-python's recipe (WebhookSignature.generate_signature_header):
    # "t={ts},v1=" + hex(HMAC-SHA256(secret UTF-8, f"{ts}.{payload}")), computed here by hand
    ts = 1_614_265_330
    expected = hmac.new(GEONODE_SECRET.encode(), f"{ts}.".encode() + BODY, hashlib.sha256)

    # WHEN our sender signs
    headers = sign(STRIPE, BODY, GEONODE_SECRET, ts + 0.9)

    # THEN the header is byte-for-byte stripe-python's
    assert headers == {"Stripe-Signature": f"t={ts},v1={expected.hexdigest()}"}


def test_verify_stripe_parses_documented_header_and_ignores_v0() -> None:
    # GIVEN the example header from Stripe's "verify manually" docs (its secret is not published)
    header = (
        "t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,"
        "v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"
    )

    # WHEN verified with some other secret at its own time
    reason = reason_of(STRIPE, {"Stripe-Signature": header}, now=1492774577)

    # THEN it parses (not "malformed header") and simply does not match
    assert reason == "no matching signature"


def test_sign_geonode_default_is_lowercase_hex_of_raw_body() -> None:
    # The contract's default: lowercase hex of HMAC-SHA256(secret UTF-8, raw body), no prefix.
    expected = hmac.new(GEONODE_SECRET.encode(), BODY, hashlib.sha256).hexdigest()

    assert sign(GEONODE, BODY, GEONODE_SECRET, NOW) == {"X-Webhook-Signature": expected}


def test_sign_geonode_with_timestamp_signs_timestamp_dot_body() -> None:
    digest = hmac.new(GEONODE_SECRET.encode(), b"1700000000." + BODY, hashlib.sha256).digest()

    headers = sign(GEONODE_FULL, BODY, GEONODE_SECRET, NOW)

    assert headers == {
        "X-Geo-Sig": "v1=" + base64.b64encode(digest).decode(),
        "X-Geo-Timestamp": "1700000000",
    }


# --- round trips, tampering, wrong secret -------------------------------------------------------


@pytest.mark.parametrize("name", CONFIGS)
def test_verify_round_trip_each_scheme(name: str) -> None:
    config = CONFIGS[name]

    verify(config, signed(config), BODY, [WebhookSecret(secret_for(config))], NOW)


@pytest.mark.parametrize("name", CONFIGS)
def test_verify_round_trip_non_utf8_body(name: str) -> None:
    # GIVEN bytes that are not UTF-8 (the body is hashed as is, never decoded)
    config = CONFIGS[name]
    body = b"\xff\xfe\x00\x80\xc3(" + bytes(range(256))

    verify(config, signed(config, body), body, [WebhookSecret(secret_for(config))], NOW)


class _UndecodableBody(bytes):
    """Raw bytes that refuse every decoding: a verifier that reads the body as text fails."""

    def decode(self, *args: Any, **kwargs: Any) -> str:
        raise AssertionError("the body was decoded before its signature was checked")


@pytest.mark.parametrize("name", CONFIGS)
def test_verify_hashes_the_raw_bytes_without_decoding_them(name: str) -> None:
    # GIVEN a signed body that fails the test if anything decodes it
    config = CONFIGS[name]
    body = _UndecodableBody(BODY)
    # THEN it verifies as the bytes it is
    verify(config, signed(config, BODY), body, [WebhookSecret(secret_for(config))], NOW)


@pytest.mark.parametrize("name", CONFIGS)
def test_verify_decides_through_constant_time_comparison(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN hmac.compare_digest watched, and then made to answer "different" to everything
    config = CONFIGS[name]
    headers = signed(config)
    secrets = [WebhookSecret(secret_for(config))]
    real = hmac.compare_digest
    compared: list[tuple[bytes, bytes]] = []

    def watched(a: Any, b: Any) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", watched)
    # WHEN a genuine delivery is verified THEN the match was found by compare_digest
    verify(config, headers, BODY, secrets, NOW)
    assert compared and any(real(a, b) for a, b in compared)
    # AND when compare_digest says no, no other comparison lets the delivery through
    monkeypatch.setattr(hmac, "compare_digest", lambda a, b: False)
    assert reason_of(config, headers) == "no matching signature"


@pytest.mark.parametrize("name", ["geonode", "standard_webhooks", "stripe", "github"])
def test_signature_config_holds_its_scheme_as_the_enum(name: str) -> None:
    # GIVEN a configuration built from the scheme's name THEN it holds the enum, equal to the name
    config = SignatureConfig(scheme=name)  # type: ignore[arg-type]
    assert config.scheme is Scheme(name) and config.scheme == name
    assert str(config.scheme) == name


@pytest.mark.parametrize("name", CONFIGS)
def test_verify_tampered_body_rejected(name: str) -> None:
    config = CONFIGS[name]
    headers = signed(config)

    assert reason_of(config, headers, body=BODY.replace(b"completed", b"failed")) == (
        "no matching signature"
    )
    assert reason_of(config, headers, body=BODY + b" ") == "no matching signature"


@pytest.mark.parametrize("name", CONFIGS)
def test_verify_wrong_secret_rejected(name: str) -> None:
    config = CONFIGS[name]
    wrong = [WebhookSecret(other_secret_for(config))]

    assert reason_of(config, signed(config), secrets=wrong) == "no matching signature"


@pytest.mark.parametrize("name", ["standard_webhooks", "stripe", "geonode_full"])
def test_verify_tampered_timestamp_rejected(name: str) -> None:
    # GIVEN a valid delivery whose timestamp header is moved by one second
    config = CONFIGS[name]
    headers = signed(config)
    if name == "stripe":
        stripe_header = headers["Stripe-Signature"]
        headers["Stripe-Signature"] = stripe_header.replace("t=1700000000", "t=1700000001")
    else:
        ts_name = "webhook-timestamp" if name == "standard_webhooks" else "X-Geo-Timestamp"
        headers[ts_name] = "1700000001"

    assert reason_of(config, headers) == "no matching signature"


def test_verify_standard_webhooks_tampered_id_rejected() -> None:
    headers = signed(STANDARD) | {"webhook-id": "msg_2"}

    assert reason_of(STANDARD, headers) == "no matching signature"


# --- malformed headers: always SignatureError, never another exception -------------------------

VALID_HEX = "ab" * 32
VALID_B64 = base64.b64encode(b"\x01" * 32).decode()

MALFORMED: list[tuple[str, dict[str, Any]]] = [
    # geonode (default: X-Webhook-Signature, hex, no prefix)
    ("geonode", {"X-Webhook-Signature": ""}),
    ("geonode", {"X-Webhook-Signature": "   "}),
    ("geonode", {"X-Webhook-Signature": "garbage"}),
    ("geonode", {"X-Webhook-Signature": "zz" * 32}),  # bad hex, right length
    ("geonode", {"X-Webhook-Signature": VALID_HEX[:-2]}),  # hex, too short
    ("geonode", {"X-Webhook-Signature": VALID_HEX + "ab"}),  # hex, too long
    ("geonode", {"X-Webhook-Signature": " ".join(["abab"] * 16)}),  # bytes.fromhex would take it
    ("geonode", {"X-Webhook-Signature": "sha256=" + VALID_HEX}),  # unexpected prefix
    ("geonode", {"X-Webhook-Signature": "é" * 64}),
    ("geonode", {"X-Webhook-Signature": None}),  # not text at all
    # geonode, configured: base64, "v1=" prefix, timestamp header
    ("geonode_full", {"X-Geo-Sig": VALID_B64, "X-Geo-Timestamp": "1700000000"}),  # no prefix
    ("geonode_full", {"X-Geo-Sig": "v1=" + "!" * 44, "X-Geo-Timestamp": "1700000000"}),
    ("geonode_full", {"X-Geo-Sig": "v1=" + VALID_B64[:-1], "X-Geo-Timestamp": "1700000000"}),
    ("geonode_full", {"X-Geo-Sig": "v1=" + VALID_HEX, "X-Geo-Timestamp": "1700000000"}),
    ("geonode_full", {"X-Geo-Sig": "v1=" + VALID_B64, "X-Geo-Timestamp": "soon"}),
    ("geonode_full", {"X-Geo-Sig": "v1=" + VALID_B64, "X-Geo-Timestamp": "1700000000.5"}),
    # standard webhooks
    ("standard_webhooks", {"webhook-signature": ""}),
    ("standard_webhooks", {"webhook-signature": "garbage"}),
    ("standard_webhooks", {"webhook-signature": "v1"}),  # missing comma and signature
    ("standard_webhooks", {"webhook-signature": "v1,"}),
    ("standard_webhooks", {"webhook-signature": "v1,!!!not-base64!!!"}),
    ("standard_webhooks", {"webhook-signature": "v1,bm9wZQ=="}),  # base64, 4 bytes
    ("standard_webhooks", {"webhook-signature": "v1," + VALID_B64.rstrip("=")}),  # bad padding
    ("standard_webhooks", {"webhook-signature": "v2," + VALID_B64}),  # no v1 entry
    ("standard_webhooks", {"webhook-signature": "v1a," + VALID_B64}),
    ("standard_webhooks", {"webhook-timestamp": "hello"}),
    ("standard_webhooks", {"webhook-timestamp": "-1700000000"}),
    ("standard_webhooks", {"webhook-timestamp": "+1700000000"}),
    ("standard_webhooks", {"webhook-timestamp": "1_700_000_000"}),
    ("standard_webhooks", {"webhook-timestamp": "1700000000.0"}),
    ("standard_webhooks", {"webhook-timestamp": "\uff11\uff17" + "\uff10" * 8}),  # full-width
    ("standard_webhooks", {"webhook-timestamp": "9" * 5000}),
    ("standard_webhooks", {"webhook-id": ""}),
    # stripe
    ("stripe", {"Stripe-Signature": ""}),
    ("stripe", {"Stripe-Signature": "i'm not even a real signature header"}),
    ("stripe", {"Stripe-Signature": "t=abc,v1=" + VALID_HEX}),
    ("stripe", {"Stripe-Signature": "t=,v1=" + VALID_HEX}),
    ("stripe", {"Stripe-Signature": "v1=" + VALID_HEX}),  # no t
    ("stripe", {"Stripe-Signature": "t=1700000000"}),  # no signature
    ("stripe", {"Stripe-Signature": "t=1700000000,v0=" + VALID_HEX}),  # only v0
    ("stripe", {"Stripe-Signature": "t=1700000000,v1=" + "zz" * 32}),
    ("stripe", {"Stripe-Signature": "t=1700000000,v1=" + VALID_B64}),
    ("stripe", {"Stripe-Signature": "t=1700000000,t=1700000001,v1=" + VALID_HEX}),
    ("stripe", {"Stripe-Signature": ",,,=,=="}),
    # github
    ("github", {"X-Hub-Signature-256": "sha256="}),
    ("github", {"X-Hub-Signature-256": VALID_HEX}),  # no prefix
    ("github", {"X-Hub-Signature-256": "sha1=" + "ab" * 20}),
    ("github", {"X-Hub-Signature-256": "sha256=" + "XY" * 32}),
    ("github", {"X-Hub-Signature-256": "SHA256=" + VALID_HEX}),
]


@pytest.mark.parametrize(("name", "override"), MALFORMED)
def test_verify_malformed_header_raises_signature_error(
    name: str, override: dict[str, Any]
) -> None:
    # GIVEN a validly signed delivery with one header replaced by junk
    config = CONFIGS[name]
    headers: dict[str, Any] = signed(config) | override

    # WHEN verified THEN the one error type comes out, with the malformed reason
    assert reason_of(config, headers) == "malformed header"


@pytest.mark.parametrize(
    ("name", "dropped"),
    [
        ("geonode", "X-Webhook-Signature"),
        ("geonode_full", "X-Geo-Sig"),
        ("geonode_full", "X-Geo-Timestamp"),
        ("standard_webhooks", "webhook-id"),
        ("standard_webhooks", "webhook-timestamp"),
        ("standard_webhooks", "webhook-signature"),
        ("stripe", "Stripe-Signature"),
        ("github", "X-Hub-Signature-256"),
    ],
)
def test_verify_missing_header_rejected(name: str, dropped: str) -> None:
    config = CONFIGS[name]
    headers = {k: v for k, v in signed(config).items() if k != dropped}

    assert reason_of(config, headers) == "missing header"


def test_verify_github_ignores_legacy_sha1_header() -> None:
    # GIVEN only the legacy X-Hub-Signature (SHA-1): it must not be taken as a fallback
    sha1 = hmac.new(GEONODE_SECRET.encode(), BODY, hashlib.sha1).hexdigest()

    assert reason_of(GITHUB, {"X-Hub-Signature": "sha1=" + sha1}) == "missing header"


# --- timestamps ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TIMESTAMPED)
@pytest.mark.parametrize("offset", [-300, -1, 0, 1, 300])
def test_verify_timestamp_within_tolerance_accepted(name: str, offset: int) -> None:
    # GIVEN a delivery signed `offset` seconds away from the receiver's clock (edges included)
    config = CONFIGS[name]

    verify(config, signed(config, at=NOW + offset), BODY, [WebhookSecret(secret_for(config))], NOW)


@pytest.mark.parametrize("name", TIMESTAMPED)
@pytest.mark.parametrize("offset", [-301, 301, -86_400, 86_400])
def test_verify_timestamp_outside_tolerance_rejected(name: str, offset: int) -> None:
    # GIVEN a correctly signed delivery, too old (offset < 0) or too far ahead (offset > 0)
    config = CONFIGS[name]
    headers = signed(config, at=NOW + offset)

    assert reason_of(config, headers) == "timestamp outside tolerance"


def test_verify_custom_tolerance_applies() -> None:
    config = SignatureConfig(scheme=Scheme.STRIPE, tolerance_seconds=10)

    verify(config, signed(config, at=NOW - 10), BODY, [WebhookSecret(GEONODE_SECRET)], NOW)
    assert reason_of(config, signed(config, at=NOW - 11)) == "timestamp outside tolerance"


def test_verify_timestamp_with_leading_zeros_is_signed_as_sent() -> None:
    # GIVEN a sender that zero-pads its timestamp: the signed string carries the padding
    ts = "01700000000"
    digest = hmac.new(GEONODE_SECRET.encode(), f"{ts}.".encode() + BODY, hashlib.sha256)
    header = f"t={ts},v1={digest.hexdigest()}"

    verify(STRIPE, {"Stripe-Signature": header}, BODY, [WebhookSecret(GEONODE_SECRET)], NOW)


@pytest.mark.parametrize("now", [float("nan"), float("inf"), float("-inf")])
def test_verify_non_finite_now_refused(now: float) -> None:
    # NaN would make every tolerance and expiry comparison False, i.e. pass.
    with pytest.raises(ValueError, match="finite"):
        verify(STRIPE, signed(STRIPE), BODY, [WebhookSecret(GEONODE_SECRET)], now)


# --- several secrets, several signatures, rotation ----------------------------------------------


@pytest.mark.parametrize("name", CONFIGS)
def test_verify_any_of_several_secrets_accepted(name: str) -> None:
    config = CONFIGS[name]
    secrets = [WebhookSecret(other_secret_for(config)), WebhookSecret(secret_for(config))]

    verify(config, signed(config), BODY, secrets, NOW)


def test_verify_standard_webhooks_several_signatures_accepted() -> None:
    # GIVEN the genuine signature among decoys: other versions, a short one, a wrong v1
    genuine = signed(STANDARD)["webhook-signature"]
    decoys = ["v1a," + VALID_B64, "v2," + VALID_B64, "v1,bm9wZQ==", "v1," + VALID_B64, "junk"]
    headers = signed(STANDARD) | {"webhook-signature": "  ".join([*decoys, genuine])}

    verify(STANDARD, headers, BODY, [WebhookSecret(SW_SECRET)], NOW)


def test_verify_stripe_several_v1_signatures_accepted() -> None:
    # GIVEN Stripe's rotation format: one v1 per active secret, plus a v0 (ignored)
    header = signed(STRIPE)["Stripe-Signature"]
    t_part, v1_part = header.split(",")
    headers = {"Stripe-Signature": f"{t_part},v1={VALID_HEX},v0={VALID_HEX},{v1_part}"}

    verify(STRIPE, headers, BODY, [WebhookSecret(GEONODE_SECRET)], NOW)


def test_verify_expired_secret_rejected() -> None:
    # GIVEN only the previous secret, whose grace period ended a second ago
    old = WebhookSecret(GEONODE_SECRET, expires_at=NOW - 1)

    assert reason_of(GEONODE, signed(GEONODE), secrets=[old]) == "no valid secret"


def test_verify_secret_expires_at_its_expiry_instant() -> None:
    old = WebhookSecret(GEONODE_SECRET, expires_at=NOW)

    assert reason_of(GEONODE, signed(GEONODE), secrets=[old]) == "no valid secret"


def test_verify_delivery_signed_with_expired_previous_secret_rejected() -> None:
    # GIVEN the new secret and the expired previous one; the delivery uses the previous one
    secrets = [
        WebhookSecret("whsec_the-new-secret"),
        WebhookSecret(GEONODE_SECRET, expires_at=NOW - 1),
    ]

    assert reason_of(GEONODE, signed(GEONODE), secrets=secrets) == "no matching signature"


def test_verify_unexpired_previous_secret_accepted() -> None:
    # GIVEN a rotation in progress: new secret, and the previous one still in its grace period
    secrets = [
        WebhookSecret("whsec_the-new-secret"),
        WebhookSecret(GEONODE_SECRET, expires_at=NOW + 1),
    ]

    # WHEN a delivery signed with the previous secret arrives THEN it verifies
    verify(GEONODE, signed(GEONODE), BODY, secrets, NOW)


def test_verify_no_secret_rejected() -> None:
    assert reason_of(GEONODE, signed(GEONODE), secrets=[]) == "no valid secret"


def test_verify_undecodable_standard_secret_skipped() -> None:
    # GIVEN one secret that is not base64 beside the good one (a bad rotation entry)
    secrets = [WebhookSecret("whsec_not*base64!"), WebhookSecret(SW_SECRET)]

    verify(STANDARD, signed(STANDARD), BODY, secrets, NOW)
    assert reason_of(STANDARD, signed(STANDARD), secrets=secrets[:1]) == "no valid secret"


def test_verify_failures_a_receiver_acts_on_have_classes() -> None:
    # GIVEN no usable secret, then a wrong one WHEN verified THEN the class says which, and
    # ``reason`` agrees with it (callers branch on the class, never on the reason's text)
    with pytest.raises(NoValidSecretError) as none:
        verify(GEONODE, signed(GEONODE), BODY, [], NOW)
    with pytest.raises(SignatureMismatchError) as wrong:
        verify(GEONODE, signed(GEONODE), BODY, [WebhookSecret("whsec_other")], NOW)
    assert (none.value.reason, wrong.value.reason) == ("no valid secret", "no matching signature")


def test_malformed_secret_bundle_raises_its_own_error() -> None:
    with pytest.raises(SecretBundleError, match="secrets"):
        parse_secret_bundle('{"secrets": "nope"}')


def test_signature_config_from_env_errors_are_settings_errors() -> None:
    with pytest.raises(SettingsError, match="SIGNATURE_ENCODING"):
        SignatureConfig.from_env({"SIGNATURE_ENCODING": "base32"})
    with pytest.raises(SettingsError, match="invalid SIGNATURE_"):
        SignatureConfig.from_env({"SIGNATURE_SCHEME": "stripe", "SIGNATURE_HEADER": "X-Sig"})


def test_verify_secrets_as_plain_string_refused() -> None:
    with pytest.raises(TypeError):
        verify(GEONODE, signed(GEONODE), BODY, GEONODE_SECRET, NOW)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        verify(GEONODE, signed(GEONODE), BODY, [GEONODE_SECRET], NOW)  # type: ignore[list-item]


def test_verify_str_body_refused() -> None:
    # A str body was already decoded: hashing a re-encoding could differ from the bytes sent.
    with pytest.raises(TypeError, match="raw request bytes"):
        verify(GEONODE, signed(GEONODE), BODY.decode(), [WebhookSecret(GEONODE_SECRET)], NOW)  # type: ignore[arg-type]


# --- header lookup -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("case", [str.lower, str.upper, str.title])
def test_verify_header_lookup_case_insensitive(name: str, case: Any) -> None:
    config = CONFIGS[name]
    headers = {case(k): v for k, v in signed(config).items()}

    verify(config, headers, BODY, [WebhookSecret(secret_for(config))], NOW)


def test_verify_conflicting_header_spellings_rejected() -> None:
    # GIVEN the same header twice in different case with different values: ambiguous
    headers = signed(GITHUB) | {"x-hub-signature-256": "sha256=" + VALID_HEX}

    assert reason_of(GITHUB, headers) == "malformed header"


def test_verify_header_value_surrounding_whitespace_ignored() -> None:
    headers = {k: f" {v}\t" for k, v in signed(STRIPE).items()}

    verify(STRIPE, headers, BODY, [WebhookSecret(GEONODE_SECRET)], NOW)


# --- nothing secret in reprs or messages --------------------------------------------------------


def test_webhook_secret_repr_hides_value() -> None:
    secret = WebhookSecret(GEONODE_SECRET, expires_at=NOW)

    assert GEONODE_SECRET not in repr(secret)
    assert GEONODE_SECRET not in str(secret)
    assert GEONODE_SECRET not in f"{[secret]}"
    assert "expires_at=1700000000.0" in repr(secret)


def test_signature_error_messages_contain_no_secret_or_signature() -> None:
    # GIVEN failures of every kind, with the computed (valid) signatures in hand
    messages = []
    reasons = set()
    for name, override in MALFORMED:
        config = CONFIGS[name]
        try:
            verify(
                config, signed(config) | override, BODY, [WebhookSecret(secret_for(config))], NOW
            )
        except SignatureError as exc:
            messages.append(str(exc))
            reasons.add(exc.reason)
    cases: list[tuple[SignatureConfig, dict[str, str], list[WebhookSecret]]] = [
        (STRIPE, signed(STRIPE, at=NOW - 1000), [WebhookSecret(GEONODE_SECRET)]),
        (STRIPE, signed(STRIPE), [WebhookSecret("whsec_other")]),
        (STRIPE, {}, [WebhookSecret(GEONODE_SECRET)]),
        (STRIPE, signed(STRIPE), [WebhookSecret(GEONODE_SECRET, expires_at=0)]),
    ]
    for config, headers, secrets in cases:
        with pytest.raises(SignatureError) as caught:
            verify(config, headers, BODY + b"!", secrets, NOW)
        messages.append(str(caught.value))
        reasons.add(caught.value.reason)

    # THEN no message holds a secret, a computed signature or a received header value
    secrets_and_signatures = [GEONODE_SECRET, SW_SECRET, SW_SECRET.removeprefix("whsec_")]
    for config in CONFIGS.values():
        secrets_and_signatures += [v.split("=")[-1] for v in signed(config).values()]
        secrets_and_signatures += [v.split(",")[-1] for v in signed(config).values()]
    secrets_and_signatures += [VALID_HEX, VALID_B64, "garbage"]
    needles = [n for n in secrets_and_signatures if len(n) >= 16]
    for message in messages:
        for needle in needles:
            assert needle not in message
    assert reasons == set(get_args(FailureReason))


# --- configuration -----------------------------------------------------------------------------


def test_signature_config_from_env_defaults() -> None:
    config = SignatureConfig.from_env({})

    assert config == SignatureConfig(scheme=Scheme.GEONODE, tolerance_seconds=300)
    assert config.signature_header == "X-Webhook-Signature"
    assert config.encoding is None and config.prefix == "" and config.timestamp_header is None


def test_signature_config_from_env_empty_values_mean_default() -> None:
    # SAM passes "" for parameters left at their empty default.
    names = ["SCHEME", "HEADER", "ENCODING", "PREFIX", "TIMESTAMP_HEADER", "TOLERANCE_SECONDS"]

    config = SignatureConfig.from_env({f"SIGNATURE_{n}": "" for n in names})

    assert config == SignatureConfig()


def test_signature_config_from_env_reads_every_variable() -> None:
    environ = {
        "SIGNATURE_SCHEME": "Geonode",
        "SIGNATURE_HEADER": "X-Geo-Sig",
        "SIGNATURE_ENCODING": "BASE64",
        "SIGNATURE_PREFIX": "v1=",
        "SIGNATURE_TIMESTAMP_HEADER": "X-Geo-Timestamp",
        "SIGNATURE_TOLERANCE_SECONDS": "60",
    }

    config = SignatureConfig.from_env(environ)

    assert config == SignatureConfig(
        header="X-Geo-Sig",
        encoding="base64",
        prefix="v1=",
        timestamp_header="X-Geo-Timestamp",
        tolerance_seconds=60,
    )


@pytest.mark.parametrize(
    ("scheme", "header"),
    [
        ("standard_webhooks", "webhook-signature"),
        ("stripe", "Stripe-Signature"),
        ("github", "X-Hub-Signature-256"),
    ],
)
def test_signature_config_from_env_fixed_schemes(scheme: str, header: str) -> None:
    config = SignatureConfig.from_env({"SIGNATURE_SCHEME": scheme})

    assert config.scheme == scheme
    assert config.signature_header == header


@pytest.mark.parametrize(
    ("environ", "match"),
    [
        ({"SIGNATURE_SCHEME": "svix"}, "SIGNATURE_SCHEME"),
        ({"SIGNATURE_ENCODING": "base32"}, "SIGNATURE_ENCODING"),
        ({"SIGNATURE_TOLERANCE_SECONDS": "0"}, "SIGNATURE_TOLERANCE_SECONDS"),
        ({"SIGNATURE_TOLERANCE_SECONDS": "-5"}, "SIGNATURE_TOLERANCE_SECONDS"),
        ({"SIGNATURE_TOLERANCE_SECONDS": "1.5"}, "SIGNATURE_TOLERANCE_SECONDS"),
        ({"SIGNATURE_TOLERANCE_SECONDS": "five"}, "SIGNATURE_TOLERANCE_SECONDS"),
        ({"SIGNATURE_TOLERANCE_SECONDS": "9" * 5000}, "SIGNATURE_TOLERANCE_SECONDS"),
        ({"SIGNATURE_HEADER": "X Webhook Signature"}, "header name"),
        ({"SIGNATURE_HEADER": "X-Sig:"}, "header name"),
        ({"SIGNATURE_TIMESTAMP_HEADER": "x-webhook-signature"}, "must differ"),
        ({"SIGNATURE_PREFIX": "sha256 ="}, "whitespace"),
        ({"SIGNATURE_SCHEME": "stripe", "SIGNATURE_HEADER": "X-Sig"}, "fixes"),
        ({"SIGNATURE_SCHEME": "github", "SIGNATURE_ENCODING": "base64"}, "fixes"),
        ({"SIGNATURE_SCHEME": "standard_webhooks", "SIGNATURE_PREFIX": "v1,"}, "fixes"),
        ({"SIGNATURE_SCHEME": "stripe", "SIGNATURE_TIMESTAMP_HEADER": "X-Ts"}, "fixes"),
    ],
)
def test_signature_config_from_env_invalid_values_raise(
    environ: dict[str, str], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        SignatureConfig.from_env(environ)


@pytest.mark.parametrize("tolerance", [0, -1, True, 1.5, None])
def test_signature_config_tolerance_cannot_be_disabled(tolerance: Any) -> None:
    with pytest.raises(ValueError, match="tolerance"):
        SignatureConfig(scheme=Scheme.STRIPE, tolerance_seconds=tolerance)


def test_signature_config_unknown_scheme_raises() -> None:
    with pytest.raises(ValueError, match="unknown signature scheme"):
        SignatureConfig(scheme="hmac")  # type: ignore[arg-type]


def test_sign_standard_webhooks_requires_msg_id() -> None:
    with pytest.raises(ValueError, match="msg_id"):
        sign(STANDARD, BODY, SW_SECRET, NOW)
    with pytest.raises(ValueError, match="msg_id"):
        sign(STANDARD, BODY, SW_SECRET, NOW, msg_id="msg\n1")


def test_sign_standard_webhooks_bad_secret_raises_without_echo() -> None:
    with pytest.raises(ValueError, match="base64") as caught:
        sign(STANDARD, BODY, "whsec_not*base64!", NOW, msg_id="m")

    assert "not*base64" not in str(caught.value)


@pytest.mark.parametrize("value", ["", None, b"bytes"])
def test_webhook_secret_invalid_value_raises(value: Any) -> None:
    with pytest.raises(ValueError, match="non-empty string"):
        WebhookSecret(value)


@pytest.mark.parametrize("expires_at", [float("nan"), float("inf"), True, "2026-01-01"])
def test_webhook_secret_invalid_expiry_raises(expires_at: Any) -> None:
    with pytest.raises(ValueError, match="expires_at"):
        WebhookSecret(GEONODE_SECRET, expires_at=expires_at)


# --- secret bundles ----------------------------------------------------------------------------


def test_parse_secret_bundle_plain_string() -> None:
    assert parse_secret_bundle(GEONODE_SECRET).shared == (WebhookSecret(GEONODE_SECRET),)


def test_parse_secret_bundle_plain_string_trailing_newline_stripped() -> None:
    # `aws secretsmanager ... --secret-string file://secret.txt` keeps the file's newline.
    assert parse_secret_bundle(f"{GEONODE_SECRET}\n").shared == (WebhookSecret(GEONODE_SECRET),)


def test_parse_secret_bundle_json_with_rotation() -> None:
    raw = json.dumps(
        {
            "secrets": [
                {"value": "whsec_new", "expires_at": None},
                {"value": "whsec_old", "expires_at": "2023-11-14T22:13:20Z"},
                {"value": "whsec_older", "expires_at": "2023-11-14T23:13:20+01:00"},
                {"value": "whsec_bare"},
            ]
        }
    )

    bundle = parse_secret_bundle(raw).shared

    assert bundle == (
        WebhookSecret("whsec_new"),
        WebhookSecret("whsec_old", expires_at=NOW),
        WebhookSecret("whsec_older", expires_at=NOW),
        WebhookSecret("whsec_bare"),
    )


def test_parse_secret_bundle_feeds_verify_rotation() -> None:
    # GIVEN a bundle whose previous secret is still in grace, and a delivery signed with it
    raw = json.dumps(
        {
            "secrets": [
                {"value": "whsec_new", "expires_at": None},
                {"value": GEONODE_SECRET, "expires_at": "2023-11-14T22:13:21Z"},
            ]
        }
    )
    secrets = parse_secret_bundle(raw).every()

    verify(GEONODE, signed(GEONODE), BODY, secrets, NOW)
    assert reason_of(GEONODE, signed(GEONODE), secrets=secrets, now=NOW + 1) == (
        "no matching signature"
    )


LEAKY = "whsec_do-not-echo-me"


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "  \n",
        "{" + LEAKY,
        '{"secrets": "' + LEAKY + '"',
        "[" * 100_000,
        json.dumps([LEAKY]),
        json.dumps({"secrets": []}),
        json.dumps({"secrets": LEAKY}),
        json.dumps({"secret": [{"value": LEAKY}]}),
        json.dumps({"secrets": [{"value": LEAKY}], "extra": LEAKY}),
        json.dumps({"secrets": [LEAKY]}),
        json.dumps({"secrets": [{"value": ""}]}),
        json.dumps({"secrets": [{"value": 42}]}),
        json.dumps({"secrets": [{"expires_at": None}]}),
        json.dumps({"secrets": [{"value": LEAKY, "expire_at": None}]}),  # typo
        json.dumps({"secrets": [{"value": LEAKY, "expires_at": "tomorrow"}]}),
        json.dumps({"secrets": [{"value": LEAKY, "expires_at": "2026-05-27T08:16:09"}]}),  # naive
        json.dumps({"secrets": [{"value": LEAKY, "expires_at": 1700000000}]}),
        json.dumps({"secrets": [{"value": LEAKY, "expires_at": LEAKY}]}),
        json.dumps({}),
        json.dumps({"subscriptions": {}}),
        json.dumps({"subscriptions": [{"value": LEAKY}]}),
        json.dumps({"subscriptions": {"wh-1": []}}),
        json.dumps({"subscriptions": {"wh-1": LEAKY}}),
        json.dumps({"subscriptions": {"wh-1": [{"value": LEAKY, "expire_at": None}]}}),
        json.dumps({"subscriptions": {" ": [{"value": LEAKY}]}}),
        json.dumps({"subscriptions": {"wh-1": [{"value": LEAKY}]}, "extra": LEAKY}),
    ],
)
def test_parse_secret_bundle_malformed_raises_without_echo(raw: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_secret_bundle(raw)

    # Neither the message nor a chained cause may carry the content.
    assert LEAKY not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None
