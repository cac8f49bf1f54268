"""The site's build hooks: the README as its home page, the settings table rendered from the
declarations at every build (so it cannot go stale), and links out of docs/ checked and kept."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File

from scrape_pipeline_ops.configuration import table

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
SETTINGS_BEGIN = "<!-- settings: rendered from the declarations when the site is built -->\n"
SETTINGS_END = "<!-- /settings -->\n"
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"(?<!!)\[((?:[^\]\[]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
log = logging.getLogger("mkdocs.hooks.docs")


def with_settings(markdown: str) -> str:
    """The page with its settings block filled in; unchanged when it has none."""
    begin, end = markdown.find(SETTINGS_BEGIN), markdown.find(SETTINGS_END)
    if begin < 0 or end < begin:
        return markdown
    return markdown[: begin + len(SETTINGS_BEGIN)] + table() + markdown[end:]


def outside_link(page: Path, text: str, target: str, repo_url: str | None) -> str:
    """A link from ``page`` to a repository file outside docs/: to the repository's copy when
    the site has one, else its text alone. A missing file is logged (``--strict`` fails)."""
    path, _, fragment = target.partition("#")
    resolved = (page.parent / path).resolve()
    if not resolved.is_relative_to(ROOT) or not resolved.exists():
        log.warning("%s links to %s: no such file in the repository", page.name, target)
        return f"[{text}]({target})"
    if resolved == README:
        return f"[{text}](index.md{'#' + fragment if fragment else ''})"
    if repo_url:
        kind = "tree" if resolved.is_dir() else "blob"
        relative = resolved.relative_to(ROOT).as_posix()
        return f"[{text}]({repo_url.rstrip('/')}/{kind}/main/{relative})"
    return text


def relinked(markdown: str, page: Path, repo_url: str | None) -> str:
    """The links of ``page`` (a file of docs/, or the README) made to work on the site, where
    the README is docs/index.md; code blocks left alone."""

    def one(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        if SCHEME.match(target) or target.startswith("#"):
            return match.group(0)
        path, hash_, fragment = target.partition("#")
        resolved = (page.parent / path).resolve()
        if resolved == DOCS:
            resolved = DOCS / "index.md"
        if resolved.is_relative_to(DOCS):
            return f"[{text}]({resolved.relative_to(DOCS).as_posix()}{hash_}{fragment})"
        return outside_link(page, text, target, repo_url)

    lines, fenced = [], False
    for line in markdown.splitlines(keepends=True):
        if FENCE.match(line):
            fenced = not fenced
        lines.append(line if fenced else LINK.sub(one, line))
    return "".join(lines)


def on_files(files: Any, config: Any) -> Any:
    """Add the README as ``index.md``."""
    files.append(File.generated(config, "index.md", content=README.read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fill the settings block and fix the links that leave docs/."""
    source = DOCS / page.file.src_uri
    if page.file.src_uri == "index.md":
        source = README
    return relinked(with_settings(markdown), source, config.get("repo_url"))
