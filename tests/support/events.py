"""The event builders the local stack uses, shared with the tests."""

from scrape_pipeline_local.events import api_gateway_event, response_json, sqs_event

__all__ = ["api_gateway_event", "response_json", "sqs_event"]
