"""The root of every error the runtime raises on purpose, and the tree below it.

    PipelineError                        scrape_pipeline.errors
    └── SettingsError (ValueError)       settings: an environment variable is missing or bad

Each class is defined beside the code that raises it and names its parent here. Context rides
on attributes (the variable's name, its value), never only in the message, so callers branch
on the class and never on message text.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Base of every error the runtime package raises on purpose (module docstring)."""
