"""The stack's generated webhook secret is recognised as a placeholder, a real one is not."""

from __future__ import annotations

import boto3
from moto import mock_aws

from scrape_pipeline.receiver.signatures.secret import WebhookSecret, WebhookSecrets
from scrape_pipeline_local.create import create_all
from scrape_pipeline_ops.rotation import SecretBundle, is_placeholder, render_bundle


def test_placeholder_generated_from_the_template_is_set_apart():
    # GIVEN the secrets created as template.yaml describes them (GenerateSecretString)
    with mock_aws():
        created = create_all(boto3.session.Session(), prefix="placeholder")
        sm = boto3.client("secretsmanager")
        raw = sm.get_secret_value(SecretId=created.webhook_secret_arn)["SecretString"]
        bundle = SecretBundle(created.webhook_secret_arn, client=sm)
        # WHEN the bundle is read THEN the placeholder is no secret, but is reported
        assert is_placeholder(raw)
        assert bundle.read() == WebhookSecrets()
        assert bundle.contents().placeholder is True
        # AND once a real secret is written it is read back, the placeholder gone
        bundle.write(WebhookSecrets({"wh-1": (WebhookSecret("whsec_" + "a" * 42),)}))
        assert [s.value for s in bundle.read().subscriptions["wh-1"]] == ["whsec_" + "a" * 42]
        assert bundle.contents().placeholder is False


def test_real_secrets_are_not_placeholders():
    assert not is_placeholder("whsec_" + "A1" * 21)  # 48 characters, but an underscore
    assert not is_placeholder(render_bundle(WebhookSecrets(shared=(WebhookSecret("x" * 48),))))
