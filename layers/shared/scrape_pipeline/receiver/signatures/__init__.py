"""Webhook signatures: how they are configured, the secrets' bundle, and verifying them."""
