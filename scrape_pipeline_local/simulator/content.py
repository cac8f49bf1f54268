"""Deterministic synthetic pages: the markdown, html and links a URL "contains"."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from scrape_pipeline_local.simulator.seeding import rng_for

_WORDS = (
    "alpha", "basalt", "cobalt", "delta", "ember", "fjord", "granite", "harbor", "island",
    "juniper", "krill", "lagoon", "meadow", "nimbus", "orchard", "prairie", "quartz", "river",
    "summit", "tundra", "upland", "valley", "willow", "xenon", "yarrow", "zephyr",
)  # fmt: skip
_LINKS_PER_PAGE = 4


@dataclass(frozen=True, slots=True)
class Page:
    """What the simulated web serves at one URL."""

    title: str
    markdown: str
    html: str
    links: tuple[str, ...]
    body: str  # the paragraph of text, which a larger page repeats


def is_http_url(value: str) -> bool:
    """An absolute http or https URL with a host."""
    try:
        parts = urlsplit(value)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return False


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


# A host named "<N>-pages.<anything>" serves a site of exactly N pages (a crawl of thousands).
_SIZED_HOST = re.compile(r"^(\d+)-pages\.")


@lru_cache(maxsize=256)
def site_size(origin: str) -> int:
    """How many pages the simulated site at ``origin`` has: 8..607, fixed per origin, or the
    N of a host named ``<N>-pages.<domain>``."""
    sized_host = _SIZED_HOST.match(urlsplit(origin).hostname or "")
    if sized_host:
        return max(1, int(sized_host.group(1)))
    return 8 + rng_for("site", origin).randrange(600)


def _site_url(origin: str, index: int) -> str:
    return f"{origin}/" if index == 0 else f"{origin}/p/{index}"


@lru_cache(maxsize=8192)
def page(url: str) -> Page:
    """The page at ``url``: same URL, same content, in every run."""
    rng = rng_for("page", url)
    origin = _origin(url)
    size = site_size(origin)
    words = [rng.choice(_WORDS) for _ in range(48)]
    title = " ".join(words[:3]).title()
    # A chain link (index + 1) keeps every site page reachable, so crawls find max_pages.
    path = urlsplit(url).path
    here = int(path[3:]) if path.startswith("/p/") and path[3:].isdigit() else 0
    picks = [(here + 1) % size] + [rng.randrange(size) for _ in range(_LINKS_PER_PAGE - 1)]
    links = tuple(dict.fromkeys(_site_url(origin, i) for i in picks))
    body = " ".join(words[3:]).capitalize() + "."
    markdown = f"# {title}\n\n{body}\n\n" + "\n".join(f"- [{link}]({link})" for link in links)
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    html = (
        f"<html><head><title>{title}</title></head><body><h1>{title}</h1>"
        f"<p>{body}</p><ul>{anchors}</ul></body></html>"
    )
    return Page(title=title, markdown=markdown, html=html, links=links, body=body)


def _fill(unit: str, length: int) -> str:
    """``length`` characters of ``unit`` repeated: multi-MB text at the cost of a copy."""
    if length <= 0:
        return ""
    return (unit * (length // len(unit) + 1))[:length]


def sized(served: Page, size: int) -> Page:
    """``served`` grown to ``size`` bytes per text format (never shrunk below its own text).

    The growth is the page's own paragraph repeated, between the text and the links, so a large
    page still reads like the small one and the links (what crawls follow) stay the same.
    """
    paragraph = served.body + " "
    # Both texts are ASCII, so characters are bytes; the filler goes just before the links.
    head, links = served.markdown.split("\n\n- ", 1)
    gap = size - len(served.markdown) - len("\n\n")
    markdown = f"{head}\n\n{_fill(paragraph, gap)}\n\n- {links}" if gap > 0 else served.markdown
    top, tail = served.html.split("<ul>", 1)
    gap = size - len(served.html) - len("<p></p>")
    html = f"{top}<p>{_fill(paragraph, gap)}</p><ul>{tail}" if gap > 0 else served.html
    return Page(served.title, markdown, html, served.links, served.body)


def extract(url: str, formats: tuple[str, ...], size: int = 0) -> dict[str, object]:
    """The ``data`` object of a completed extraction, holding only the requested formats.

    ``size`` (the work's drawn ``content_bytes``): bytes of each text format; 0 keeps the
    natural page.
    """
    served = sized(page(url), size) if size else page(url)
    data: dict[str, object] = {}
    if "markdown" in formats:
        data["markdown"] = served.markdown
    if "html" in formats:
        data["html"] = served.html
    if "links" in formats:
        data["links"] = list(served.links)
    return data


def crawl_order(start_url: str, max_pages: int) -> list[str]:
    """Pages a crawl from ``start_url`` visits, breadth first, at most ``max_pages``."""
    seen: dict[str, None] = {start_url: None}
    frontier = deque([start_url])
    while frontier and len(seen) < max_pages:
        for link in page(frontier.popleft()).links:
            if link not in seen:
                seen[link] = None
                frontier.append(link)
                if len(seen) >= max_pages:
                    break
    return list(seen)
