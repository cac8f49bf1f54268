"""Operator tools: the ``scrape-pipeline`` CLI, the pollers, secret rotation. Never in the layer.

They import the runtime package ``scrape_pipeline``; the runtime never imports them, so the
Lambda layer ships only what the three functions run.
"""
