"""The receiver handler fuzzed through real API Gateway proxy events, against moto in-process.

Properties (each example starts from an empty table and empty queues, and checks them after):

(a) bad input never gets a 5xx: AWS is never made to fail here, so 503 would be a bug;
(b) without a valid signature nothing is written: no ledger row, no queue message, ever;
(c) with a valid signature over a JSON document the answer is 200 with exactly one row and one
    message for that job (a second identical delivery: 200 ``duplicate``, nothing more), or 400
    with nothing written, and 400 exactly when ``read_notification`` finds no usable job in it
    or ``Freshness`` no usable timestamp, or 401 with nothing written when it is stamped outside
    the window; an ``X-Webhook-Event`` header never changes the answer.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import string
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from functions.receiver import app as receiver_app
from scrape_pipeline.receiver.freshness import (
    DEFAULT_MAX_AGE_SECONDS,
    Freshness,
    StaleDeliveryError,
)
from scrape_pipeline.receiver.payload import (
    EVENT_KINDS,
    FieldLocations,
    PayloadError,
    read_notification,
)
from scrape_pipeline.receiver.signatures.config import SignatureConfig
from scrape_pipeline_local.events import api_gateway_event, response_json
from scrape_pipeline_ops.signing import sign
from tests.property.conftest import MAX_BODY_BYTES, SECRET, TABLE, FakeContext, ReceiverStack

CONFIG = SignatureConfig()
SIGNATURE_HEADER = CONFIG.signature_header  # X-Webhook-Signature
EVENT_HEADER = "X-Webhook-Event"
DELIVERY_HEADER = "X-Webhook-Delivery-Id"
# Headers the receiver reads: random header names never collide with them by accident, so each
# example decides on purpose whether (and in which case) they are present.
KNOWN = frozenset(
    h.lower()
    for h in (SIGNATURE_HEADER, EVENT_HEADER, DELIVERY_HEADER, "webhook-id", "x-github-delivery")
)
HEX = "0123456789abcdefABCDEF"
TCHAR = "!#$%&'*+-.^_`|~" + string.ascii_letters + string.digits
WELL_FORMED_ROUTE = re.compile(r"^/webhooks/[-._~()'!*:@,;=+&$\w]+$")
NOW_IS_IRRELEVANT = 1_800_000_000.0  # the default scheme signs no timestamp

# A request the router refuses adds no metric; Powertools warns about flushing none.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


def invoke(proxy_event: dict[str, Any]) -> dict[str, Any]:
    """The real handler, as Lambda calls it (``--hypothesis-show-statistics`` counts answers)."""
    response: dict[str, Any] = receiver_app.lambda_handler(proxy_event, FakeContext())
    event(f"HTTP {response['statusCode']}")
    return response


def digest(body: bytes, secret: str = SECRET) -> bytes:
    """The HMAC the default (geonode) scheme expects for ``body``."""
    return hmac.new(secret.encode(), body, hashlib.sha256).digest()


def assert_nothing_written(stack: ReceiverStack) -> None:
    """No ledger row and no queue message (the queue is drained: the next example starts empty)."""
    items = stack.items()
    messages = stack.drain()
    assert items == [], f"ledger rows written: {[i['pk']['S'] for i in items]}"
    assert messages == [], f"messages sent: {messages}"
    stack.clean()


# --- strategies ------------------------------------------------------------------------------


@st.composite
def random_case(draw: st.DrawFn, name: str) -> str:
    """``name`` with each letter's case chosen at random."""
    flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
    return "".join(c.upper() if up else c.lower() for c, up in zip(name, flips, strict=True))


header_values = st.text(st.characters(codec="utf-8"), max_size=40)
other_header_names = st.text(TCHAR, min_size=1, max_size=24).filter(
    lambda n: n.lower() not in KNOWN
)
other_headers = st.dictionaries(other_header_names, header_values, max_size=6)


def repeated(seed: bytes, size: int) -> bytes:
    """``size`` bytes made of ``seed`` over and over (large bodies without large draws)."""
    return (seed * (size // len(seed) + 1))[:size]


# Bodies a sender (or an attacker) might send: anything, including not UTF-8, plausible
# notifications, and sizes around the limit (well over it, too).
any_bytes = st.one_of(
    st.binary(max_size=200),
    st.text(st.characters(codec="utf-8"), max_size=80).map(str.encode),
    st.text(max_size=40).map(lambda s: s.encode("utf-16")),
    st.sampled_from([b"", b"{}", b"[]", b"null", b"\xff\xfe\xfd", b"[" * 5000, b"1" * 5000]),
    st.builds(
        repeated,
        st.binary(min_size=1, max_size=8),
        st.integers(MAX_BODY_BYTES - 4, MAX_BODY_BYTES + 4) | st.sampled_from([40 * 1024]),
    ),
)
notification_bytes = st.builds(
    lambda job, event: json.dumps(
        {"event": event, "timestamp": int(time.time()), "data": {"job_id": job}}
    ).encode(),
    st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,20}\Z"),
    st.sampled_from(sorted(EVENT_KINDS)),
)
bodies = any_bytes | notification_bytes


@st.composite
def bad_signature(draw: st.DrawFn, body: bytes) -> str:
    """A signature header value that is not a valid signature of ``body`` under any reading."""
    good = digest(body)
    good_hex = good.hex()
    flip_at = draw(st.integers(0, len(good) - 1))
    flipped = bytearray(good)
    flipped[flip_at] ^= draw(st.integers(1, 255))
    hex_lengths = st.integers(0, 140).filter(lambda n: n != 64)
    value: str = draw(
        st.one_of(
            header_values,
            hex_lengths.flatmap(lambda n: st.text(HEX, min_size=n, max_size=n)),
            st.binary(min_size=32, max_size=32).map(bytes.hex),  # valid-looking, wrong
            st.just(bytes(flipped).hex()),  # one byte off
            st.sampled_from([good_hex[:-1], good_hex[:-2], good_hex + "0", good_hex + "00"]),
            st.just(base64.b64encode(good).decode()),  # right digest, wrong encoding
            st.just("sha256=" + good_hex),  # a prefix this scheme does not use
            st.just(good_hex[:32] + " " + good_hex[32:]),
            st.just(good_hex + "\n"),
            st.just(digest(body, "whsec_another-secret").hex()),  # someone else's secret
            st.just(digest(body + b" ").hex()),  # signed over other bytes
        )
    )
    return value


@dataclass(frozen=True)
class Delivery:
    """An API Gateway event and what the receiver will see of it."""

    event: dict[str, Any]
    raw: bytes | None  # the bytes the receiver verifies; None when the body is not valid base64


@st.composite
def encoded(draw: st.DrawFn, /, body: bytes, headers: Mapping[str, str], **kwargs: Any) -> Delivery:
    """``body`` in a proxy event, base64 or text as API Gateway may send it, or mangled."""
    mode = draw(
        st.sampled_from(["base64", "text", "flag-lies", "not-base64", "no-flag", "no-body"])
    )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if mode == "text" and text is not None:
        return Delivery(api_gateway_event(body, headers, base64_encoded=False, **kwargs), body)
    proxy = api_gateway_event(body, headers, **kwargs)
    if mode == "flag-lies" and text is not None:
        # isBase64Encoded says yes, the body is the text itself: it may or may not decode.
        proxy["body"] = text
    elif mode == "not-base64":
        proxy["body"] = draw(
            st.one_of(
                st.text(st.characters(codec="utf-8"), min_size=1, max_size=60),
                st.just(proxy["body"] + "!"),
                st.just(proxy["body"].rstrip("=") + "="),
                st.just("=" + proxy["body"]),
                st.just(proxy["body"] + "\x00"),
            )
        )
    elif mode == "no-flag":
        del proxy["isBase64Encoded"]
        proxy["body"] = text or ""
    elif mode == "no-body":
        proxy["body"] = None
    body_field = proxy.get("body") or ""
    if not proxy.get("isBase64Encoded"):
        return Delivery(proxy, body_field.encode())
    try:
        return Delivery(proxy, base64.b64decode(body_field, validate=True))
    except (binascii.Error, ValueError):
        return Delivery(proxy, None)


@st.composite
def unsigned_headers(draw: st.DrawFn, body: bytes) -> dict[str, str]:
    """Random headers; the signature header absent, or present (any case, maybe twice) but bad."""
    headers = draw(other_headers)
    for _ in range(draw(st.integers(0, 2))):
        headers[draw(random_case(SIGNATURE_HEADER))] = draw(bad_signature(body))
    if draw(st.booleans()):
        headers[draw(random_case(EVENT_HEADER))] = draw(
            st.sampled_from(sorted(EVENT_KINDS)) | header_values
        )
    if draw(st.booleans()):
        headers[draw(random_case(DELIVERY_HEADER))] = draw(header_values)
    return headers


# --- (a) and (b): no valid signature -----------------------------------------------------------


@settings(max_examples=120)
@given(data=st.data())
def test_receiver_unsigned_random_delivery_is_4xx_and_writes_nothing(
    receiver_stack: ReceiverStack, data: st.DataObject
):
    """(a)+(b) on the webhook route: random bytes (not UTF-8, huge, near the limit, plausible
    notifications), random headers, bad signatures in any case, base64 or not or broken.

    The answer is exactly 400 (body not base64), 413 (over MAX_BODY_BYTES) or 401, never 5xx;
    and nothing reaches the ledger or the queue.
    """
    receiver_stack.begin()
    body = data.draw(bodies, label="body")
    headers = data.draw(unsigned_headers(body), label="headers")
    delivery = data.draw(encoded(body, headers), label="delivery")

    response = invoke(delivery.event)

    if delivery.raw is None:
        expected = 400
    elif len(delivery.raw) > MAX_BODY_BYTES:
        expected = 413
    else:
        expected = 401
    assert response["statusCode"] == expected, response
    assert_nothing_written(receiver_stack)


methods = st.sampled_from(["POST", "GET", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "post"])
paths = st.one_of(
    st.just("/webhooks/geonode"),
    st.builds(lambda s: "/webhooks/" + s, st.text(st.characters(codec="utf-8"), max_size=20)),
    st.builds(lambda s: "/" + s, st.text(st.characters(codec="utf-8"), max_size=30)),
    st.sampled_from(
        ["/", "", "/webhooks", "/webhooks/", "/webhooks/a/b", "//webhooks/x", "/webhooks/x/"]
    ),
)


@settings(max_examples=60)
@given(data=st.data(), method=methods | st.text(TCHAR, min_size=1, max_size=8), path=paths)
def test_receiver_random_method_and_path_is_4xx_and_writes_nothing(
    receiver_stack: ReceiverStack, data: st.DataObject, method: str, path: str
):
    """(a)+(b) with random HTTP methods and paths: any answer is a 4xx, nothing is written.

    A well-formed POST /webhooks/<provider> reaches the receiver (401/413/400, as above); any
    other method or path is refused by the router with a 4xx.
    """
    receiver_stack.begin()
    body = data.draw(bodies, label="body")
    headers = data.draw(unsigned_headers(body), label="headers")
    delivery = data.draw(encoded(body, headers, method=method, path=path), label="delivery")

    response = invoke(delivery.event)

    assert 400 <= response["statusCode"] < 500, response
    if method == "POST" and WELL_FORMED_ROUTE.match(path):
        assert response["statusCode"] in (400, 401, 413), response
    assert_nothing_written(receiver_stack)


# --- (c): a valid signature --------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(codec="utf-8"), max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
job_ids = st.one_of(
    st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,30}\Z"),
    st.sampled_from(["", "-x", ".x", "a b", "../etc", "a/b", "x" * 128, "x" * 129, "é", "a\n"]),
    json_values,
)
events = st.one_of(
    st.sampled_from(sorted(EVENT_KINDS)),
    st.sampled_from(["", "extract_failed", "EXTRACT_COMPLETED", " extract_completed"]),
    json_values,
)
# Offsets from now far from the window's edges (examples run a few ms after they are drawn).
_AGES = [0, 3600, DEFAULT_MAX_AGE_SECONDS - 3600, DEFAULT_MAX_AGE_SECONDS + 3600, -3600]
stamps = st.one_of(
    st.sampled_from(_AGES).map(
        lambda age: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - age))
    ),
    st.sampled_from(_AGES).map(lambda age: int(time.time() - age)),
    st.sampled_from(["", "now", "2026-05-27T08:16:09", "2026-13-01T00:00:00Z", "1e9", True]),
    json_values,
)


@st.composite
def notification_documents(draw: st.DrawFn) -> Any:
    """JSON documents around the notification shape: envelope, flat, both, neither, junk."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)  # not even an object, most of the time
    document: dict[str, Any] = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3))
    if draw(st.booleans()):
        document["event"] = draw(events)
    if draw(st.booleans()):
        document["event_type"] = draw(events)
    if draw(st.booleans()):
        document["data"] = draw(
            st.fixed_dictionaries({"job_id": job_ids}, optional={"status": json_values})
            | json_values
        )
    if draw(st.booleans()):
        document["job_id"] = draw(job_ids)
    if draw(st.integers(0, 3)):
        document["timestamp"] = draw(stamps)
    return document


@st.composite
def signed_deliveries(draw: st.DrawFn) -> tuple[bytes, dict[str, str]]:
    """A JSON body signed with the configured secret, maybe padded to around the size limit."""
    document = draw(notification_documents())
    body = json.dumps(document, ensure_ascii=draw(st.booleans())).encode()
    if isinstance(document, dict) and draw(st.integers(0, 5)) == 0:
        # Pad to a few bytes either side of the limit: 413 exactly when over it.
        target = draw(st.integers(MAX_BODY_BYTES - 3, MAX_BODY_BYTES + 3))
        document["pad"] = ""
        overhead = len(json.dumps(document, ensure_ascii=True).encode())
        document["pad"] = "x" * max(target - overhead, 0)
        body = json.dumps(document, ensure_ascii=True).encode()
    headers = draw(other_headers)
    value = sign(CONFIG, body, SECRET, NOW_IS_IRRELEVANT)[SIGNATURE_HEADER]
    # Equivalent spellings of the same valid signature: any header case, upper-case hex,
    # surrounding blanks (not part of a field value, RFC 9110).
    value = draw(st.sampled_from([value, value.upper(), f" {value}\t"]))
    headers[draw(random_case(SIGNATURE_HEADER))] = value
    if draw(st.booleans()):
        # Unsigned: it must change nothing, whatever it says.
        value = draw(st.sampled_from(sorted(EVENT_KINDS)) | header_values)
        headers[draw(random_case(EVENT_HEADER))] = value
    return body, headers


STALE = "stale"


def expected_notification(body: bytes) -> tuple[str, str, str] | str:
    """(kind, job id, event) the receiver must accept, the error it must answer 400 with, or
    ``STALE`` for a 401."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return "body is not JSON"
    try:
        note = read_notification(document, FieldLocations())
        Freshness().check(note.stamp, time.time())
    except PayloadError as exc:
        return str(exc)
    except StaleDeliveryError:
        return STALE
    return note.kind.value, note.job_id, note.event


@settings(max_examples=120)
@given(delivery=signed_deliveries(), base64_encoded=st.booleans())
def test_receiver_signed_json_is_accepted_once_or_400_exactly_per_read_notification(
    receiver_stack: ReceiverStack,
    delivery: tuple[bytes, dict[str, str]],
    base64_encoded: bool,
):
    """(a)+(c): a validly signed JSON document (random shape, random job ids and events, the
    timestamps fresh, stale or junk, an event header that says anything, sizes around the
    limit) gets:

    - 200 ``accepted`` with exactly one RECEIVED row and one message for the job
      ``read_notification`` names, and the same delivery again gets 200 ``duplicate`` and
      writes nothing more; or
    - 400 with nothing written, exactly when ``read_notification`` rejects the document or
      ``Freshness`` its timestamp; 401 with nothing written when that is outside the window; or
    - 413 with nothing written, exactly when the body is over MAX_BODY_BYTES.
    """
    receiver_stack.begin()
    body, headers = delivery
    proxy = api_gateway_event(body, headers, base64_encoded=base64_encoded)

    response = invoke(proxy)

    expected = expected_notification(body)
    if len(body) > MAX_BODY_BYTES:
        assert response["statusCode"] == 413, response
        assert_nothing_written(receiver_stack)
    elif expected == STALE:
        assert response["statusCode"] == 401, response
        assert_nothing_written(receiver_stack)
    elif isinstance(expected, str):
        assert response["statusCode"] == 400, response
        assert response_json(response) == {"error": expected}
        assert_nothing_written(receiver_stack)
    else:
        kind, job_id, event_name = expected
        assert response["statusCode"] == 200, response
        assert response_json(response) == {"status": "accepted", "kind": kind, "job_id": job_id}
        [item] = receiver_stack.items()
        assert item["pk"]["S"] == f"{kind}#{job_id}"
        assert item["state"]["S"] == "RECEIVED"
        assert item["detail"]["M"]["event"]["S"] == event_name
        assert receiver_stack.drain() == [{"kind": kind, "job_id": job_id, "source": "webhook"}]

        again = invoke(api_gateway_event(body, headers, base64_encoded=base64_encoded))

        assert again["statusCode"] == 200, again
        assert response_json(again) == {"status": "duplicate", "kind": kind, "job_id": job_id}
        assert receiver_stack.items() == [item]
        assert receiver_stack.drain() == []
        receiver_stack.dynamodb.delete_item(TableName=TABLE, Key={"pk": item["pk"]})
        receiver_stack.clean()


@settings(max_examples=60)
@given(body=any_bytes, data=st.data())
def test_receiver_signed_random_bytes_are_400_or_413_and_write_nothing(
    receiver_stack: ReceiverStack, body: bytes, data: st.DataObject
):
    """(a)+(c) for bodies that are not notifications: validly signed random bytes (not UTF-8,
    UTF-16, deep nesting, huge) get 413 when over the limit, else 400; never 5xx, no writes.
    """
    receiver_stack.begin()
    headers = data.draw(other_headers, label="headers")
    headers.update(sign(CONFIG, body, SECRET, NOW_IS_IRRELEVANT))
    expected = expected_notification(body)
    # Random bytes that happen to be a usable notification would belong to the test above.
    assume(isinstance(expected, str))

    response = invoke(api_gateway_event(body, headers))

    assert response["statusCode"] == (413 if len(body) > MAX_BODY_BYTES else 400), response
    assert_nothing_written(receiver_stack)
