"""What the results bucket holds for some jobs, read by ListObjectVersions over whole prefixes.

One list call returns up to 1,000 versions and delete markers, so a prefix of N keys costs
about N / 1,000 calls, however many jobs the audit judges: never a HEAD per job. Each key's
history says whether it is there now (its latest version is not a delete marker) and how many
versions were written (a result is written once: a second version is a second write).

    results/<kind>/<job id>[/<item index>]/<file>       -> objects[(kind, job id, item)][file]
    dead-letters/<kind>/<job id>[/<item index>].json    -> dead_letters[(kind, job id, item)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from scrape_pipeline.jobs import JobKind
from scrape_pipeline.processor.results import DEAD_LETTER_PREFIX, RESULTS_PREFIX

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

# (kind, job id, item index or None): one job, or one item of a batch or crawl.
Where = tuple[JobKind, str, int | None]
_KINDS: Final = {kind.value: kind for kind in JobKind}
_ITEM_DIGITS: Final = 5  # result_prefix writes item indexes as 00042


@dataclass
class KeyHistory:
    """One key's versions: how many were written, the latest's size, whether it is deleted."""

    versions: int = 0
    size: int = 0
    latest_deleted: bool = False

    @property
    def live(self) -> bool:
        """A version is there now (none written, or a delete marker on top: not)."""
        return self.versions > 0 and not self.latest_deleted


@dataclass
class Listing:
    """The histories found, grouped by job (and item), and what listing them cost."""

    objects: dict[Where, dict[str, KeyHistory]] = field(default_factory=dict)
    dead_letters: dict[Where, KeyHistory] = field(default_factory=dict)
    calls: int = 0
    entries: int = 0  # versions and delete markers the calls returned

    def files(self, where: Where) -> dict[str, KeyHistory]:
        """The result files of one job or item, by file name (empty: none ever written)."""
        return self.objects.get(where, {})

    def dead_letter(self, where: Where) -> KeyHistory | None:
        """The dead-letter record's history, None when none was ever written."""
        return self.dead_letters.get(where)


def parse_key(key: str) -> tuple[str, Where, str] | None:
    """``(area, where, file)`` of a result or dead-letter key; None for any other key."""
    parts = key.split("/")
    if len(parts) < 3 or parts[1] not in _KINDS:
        return None
    area, kind = parts[0], _KINDS[parts[1]]
    if area == RESULTS_PREFIX and len(parts) == 4:
        return area, (kind, parts[2], None), parts[3]
    if area == RESULTS_PREFIX and len(parts) == 5 and _is_index(parts[3]):
        return area, (kind, parts[2], int(parts[3])), parts[4]
    if area == DEAD_LETTER_PREFIX and len(parts) == 3 and parts[2].endswith(".json"):
        return area, (kind, parts[2].removesuffix(".json"), None), ""
    if area == DEAD_LETTER_PREFIX and len(parts) == 4 and parts[3].endswith(".json"):
        index = parts[3].removesuffix(".json")
        if _is_index(index):
            return area, (kind, parts[2], int(index)), ""
    return None


def _is_index(text: str) -> bool:
    return len(text) >= _ITEM_DIGITS and text.isdigit()


def list_histories(
    s3: S3Client,
    bucket: str,
    prefixes: Iterable[str],
    wanted: Callable[[Where], bool] = lambda _: True,
) -> Listing:
    """Every key's history under ``prefixes``, keeping only the jobs ``wanted`` says."""
    listing = Listing()
    for prefix in prefixes:
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        while True:
            page = s3.list_object_versions(**request)
            listing.calls += 1
            for version in page.get("Versions", []):
                _add(listing, version, wanted, marker=False)
            for marker in page.get("DeleteMarkers", []):
                _add(listing, marker, wanted, marker=True)
            if not page.get("IsTruncated"):
                break
            request["KeyMarker"] = page.get("NextKeyMarker", "")
            request["VersionIdMarker"] = page.get("NextVersionIdMarker", "")
    return listing


def _add(listing: Listing, entry: Any, wanted: Callable[[Where], bool], *, marker: bool) -> None:
    listing.entries += 1
    parsed = parse_key(str(entry["Key"]))
    if parsed is None or not wanted(parsed[1]):
        return
    area, where, name = parsed
    if area == RESULTS_PREFIX:
        history = listing.objects.setdefault(where, {}).setdefault(name, KeyHistory())
    else:
        history = listing.dead_letters.setdefault(where, KeyHistory())
    latest = bool(entry.get("IsLatest"))
    if marker:
        history.latest_deleted = history.latest_deleted or latest
        return
    history.versions += 1
    if latest:
        history.size = int(entry.get("Size", 0))


def kind_prefixes(kinds: Iterable[JobKind]) -> list[str]:
    """The result and dead-letter prefixes of each of ``kinds``."""
    return [
        f"{area}/{kind.value}/" for kind in kinds for area in (RESULTS_PREFIX, DEAD_LETTER_PREFIX)
    ]
