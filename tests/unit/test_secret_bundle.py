"""The secret bundle per subscription: what a rotation keeps, and how an old flat one migrates."""

from __future__ import annotations

import json

from scrape_pipeline.receiver.signatures.secret import (
    WebhookSecret,
    WebhookSecrets,
    parse_secret_bundle,
)
from scrape_pipeline_ops.rotation import (
    BundleContents,
    render_bundle,
    valid_for,
    with_new_secret,
    with_rotated_secret,
)

NOW = 1_700_000_000.0
UNTIL = NOW + 600


def test_per_subscription_bundle_round_trips_through_its_stored_text():
    secrets = WebhookSecrets(
        {
            "wh-a": (WebhookSecret("whsec_a2"), WebhookSecret("whsec_a1", expires_at=UNTIL)),
            "wh-b": (WebhookSecret("whsec_b"),),
        }
    )
    text = render_bundle(secrets)
    assert set(json.loads(text)) == {"subscriptions"}
    assert parse_secret_bundle(text) == secrets


def test_old_flat_bundle_reads_as_shared_by_every_subscription():
    raw = json.dumps({"secrets": [{"value": "whsec_x"}, {"value": "whsec_y"}]})
    secrets = parse_secret_bundle(raw)
    assert secrets.subscriptions == {}
    assert [s.value for s in valid_for(secrets, "any-webhook", NOW)] == ["whsec_x", "whsec_y"]
    assert render_bundle(secrets) == json.dumps(
        {
            "secrets": [
                {"value": "whsec_x", "expires_at": None},
                {"value": "whsec_y", "expires_at": None},
            ]
        }
    )


def test_rotation_expires_only_that_subscriptions_previous_secret():
    current = WebhookSecrets(
        {"wh-a": (WebhookSecret("whsec_a"),), "wh-b": (WebhookSecret("whsec_b"),)}
    )
    after = with_rotated_secret(current, "wh-a", "whsec_a2", started=NOW, until=UNTIL)
    assert after.subscriptions == {
        "wh-a": (WebhookSecret("whsec_a2"), WebhookSecret("whsec_a", expires_at=UNTIL)),
        "wh-b": (WebhookSecret("whsec_b"),),
    }
    # past the grace, a's old secret is retired and b's own still verifies b
    assert [s.value for s in valid_for(after, "wh-a", UNTIL)] == ["whsec_a2"]
    assert [s.value for s in valid_for(after, "wh-b", UNTIL + 86_400)] == ["whsec_b"]


def test_rotation_drops_a_secret_already_expired_and_never_lengthens_a_grace():
    current = WebhookSecrets(
        {
            "wh-a": (
                WebhookSecret("whsec_a2"),
                WebhookSecret("whsec_a1", expires_at=NOW + 60),
                WebhookSecret("whsec_a0", expires_at=NOW - 1),
            )
        }
    )
    after = with_rotated_secret(current, "wh-a", "whsec_a3", started=NOW, until=UNTIL)
    assert after.subscriptions["wh-a"] == (
        WebhookSecret("whsec_a3"),
        WebhookSecret("whsec_a2", expires_at=UNTIL),
        WebhookSecret("whsec_a1", expires_at=NOW + 60),
    )


def test_first_rotation_of_an_old_flat_bundle_writes_it_per_subscription():
    # GIVEN an old flat bundle: three subscriptions' secrets, whose is whose unknown
    flat = parse_secret_bundle(
        json.dumps({"secrets": [{"value": f"whsec_{n}"} for n in ("a", "b", "c")]})
    )
    shared = flat.shared
    # WHEN a's secret is rotated
    after = with_rotated_secret(
        flat, "wh-a", "whsec_a2", started=NOW, until=UNTIL, siblings=["wh-b", "wh-c"]
    )
    # THEN each subscription has its own entry, nothing shared is left; a's old secrets expire
    # with its grace, b and c keep the old ones (one of them is theirs) without an expiry
    assert after.shared == ()
    assert after.subscriptions["wh-a"] == (
        WebhookSecret("whsec_a2"),
        *(WebhookSecret(s.value, expires_at=UNTIL) for s in shared),
    )
    assert after.subscriptions["wh-b"] == shared and after.subscriptions["wh-c"] == shared
    assert set(json.loads(render_bundle(after))) == {"subscriptions"}
    # AND past a's grace, b and c still verify
    assert (
        BundleContents(after, placeholder=False).without_valid_secret(
            ["wh-a", "wh-b", "wh-c"], UNTIL + 1
        )
        == []
    )


def test_new_subscription_joins_an_old_flat_bundle_beside_its_shared_secrets():
    flat = WebhookSecrets(shared=(WebhookSecret("whsec_old"),))
    after = with_new_secret(flat, "wh-new", "whsec_new", NOW)
    assert after.shared == flat.shared
    assert after.subscriptions == {"wh-new": (WebhookSecret("whsec_new"),)}
    assert parse_secret_bundle(render_bundle(after)) == after


def test_a_subscription_whose_every_secret_expired_is_named():
    secrets = WebhookSecrets(
        {
            "wh-a": (WebhookSecret("whsec_a"),),
            "wh-b": (WebhookSecret("whsec_b", expires_at=NOW),),
        }
    )
    contents = BundleContents(secrets, placeholder=False)
    assert contents.without_valid_secret(["wh-a", "wh-b", "wh-unknown"], NOW) == [
        "wh-b",
        "wh-unknown",
    ]
    assert [s.value for s in contents.active(NOW)] == ["whsec_a"]


def test_every_secret_once_current_ones_first():
    secrets = WebhookSecrets(
        {
            "wh-a": (WebhookSecret("whsec_a1", expires_at=UNTIL), WebhookSecret("whsec_a2")),
            "wh-b": (WebhookSecret("whsec_a1", expires_at=UNTIL), WebhookSecret("whsec_b")),
        }
    )
    assert [s.value for s in secrets.every()] == ["whsec_a2", "whsec_b", "whsec_a1"]
