"""Request bodies, validated so that bad input gets FastAPI's 422 ``{"detail": [...]}`` shape."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from scrape_pipeline_local.simulator.content import is_http_url

Format = Literal["markdown", "html", "links"]
EventType = Literal["extract_completed", "batch_completed", "crawl_completed"]
MAX_BATCH_URLS = 1000


def _http_url(value: str) -> str:
    if not is_http_url(value):
        raise ValueError("must be an absolute http or https URL")
    return value


HttpUrl = Annotated[str, AfterValidator(_http_url)]
Formats = Annotated[list[Format], Field(min_length=1)]


class ExtractRequest(BaseModel):
    """``POST /v1/extract``; proxy, headers and wait_config are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    url: HttpUrl
    formats: Formats = ["markdown"]
    render_js: bool = False
    processing_mode: Literal["sync", "async"] | None = None


class BatchRequest(BaseModel):
    """``POST /v1/batch``: 1..1000 URLs; invalid ones are counted, or refused when not ignored."""

    model_config = ConfigDict(extra="allow")

    urls: Annotated[list[str], Field(min_length=1, max_length=MAX_BATCH_URLS)]
    ignore_invalid_urls: bool = True
    formats: Formats = ["markdown"]
    render_js: bool = False

    @model_validator(mode="after")
    def _refuse_invalid(self) -> Self:
        bad = [index for index, url in enumerate(self.urls) if not is_http_url(url)]
        if bad and not self.ignore_invalid_urls:
            raise ValueError(f"invalid URLs at indexes {bad[:20]}")
        if len(bad) == len(self.urls):
            raise ValueError("no valid http or https URL in urls")
        return self


class CrawlRequest(BaseModel):
    """``POST /v1/crawl``."""

    model_config = ConfigDict(extra="allow")

    url: HttpUrl
    # At most the simulator's crawl_max_pages_cap, checked where the configuration is known.
    max_pages: Annotated[int, Field(ge=1)] | None = None
    formats: Formats = ["markdown"]
    render_js: bool = False


class WebhookCreate(BaseModel):
    """``POST /v1/webhooks``."""

    url: HttpUrl
    event_type: EventType
    description: Annotated[str, Field(max_length=500)] | None = None


class WebhookUpdate(BaseModel):
    """``PATCH``/``PUT /v1/webhooks/{id}``: only the fields sent change."""

    model_config = ConfigDict(extra="forbid")

    url: HttpUrl | None = None
    event_type: EventType | None = None
    description: Annotated[str, Field(max_length=500)] | None = None
    is_active: bool | None = None

    def changes(self) -> dict[str, object]:
        """The fields sent; a null description clears it, other nulls change nothing."""
        sent = self.model_dump(include=self.model_fields_set)
        return {k: v for k, v in sent.items() if v is not None or k == "description"}
