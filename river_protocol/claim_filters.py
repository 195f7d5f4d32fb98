"""Which jobs a client's producers may claim: River's ``fetch_only_known_kinds`` and tag pools.

Both filters are opt-in; without them a producer claims every kind and tag in
its queue, as River does. They only narrow the claim statement (the
``ClaimJobs`` fields), so nothing about the job rows themselves changes.

``TagFilter`` gives Loco-style worker pools (``river work --tags a,b``): a
client with ``TagFilter(("a", "b"))`` takes only jobs carrying at least one of
those tags; a client with ``TagFilter(())`` takes only untagged jobs, so
tagged work is left for the pools that name its tags.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from river_protocol.errors import ValidationError
from river_protocol.options import validate_tags


@dataclass(frozen=True, slots=True)
class TagFilter:
    """``tags`` non-empty: jobs with any of them; empty: only jobs without tags."""

    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.tags, str):
            raise ValidationError("TagFilter tags must be a tuple of tags, not one string")
        object.__setattr__(self, "tags", tuple(dict.fromkeys(self.tags)))
        validate_tags(self.tags)


@dataclass(frozen=True, slots=True)
class ClaimFilter:
    """The ``ClaimJobs`` filter fields for one producer."""

    kinds: tuple[str, ...] | None = None
    tags_any: tuple[str, ...] | None = None
    untagged_only: bool = False


def claim_filter(
    *, known_kinds: Iterable[str], fetch_only_known_kinds: bool, tag_filter: TagFilter | None
) -> ClaimFilter:
    """The claim filter for a client's configuration (all off by default)."""
    kinds = tuple(sorted(set(known_kinds))) if fetch_only_known_kinds else None
    if tag_filter is None:
        return ClaimFilter(kinds=kinds)
    if tag_filter.tags:
        return ClaimFilter(kinds=kinds, tags_any=tag_filter.tags)
    return ClaimFilter(kinds=kinds, untagged_only=True)
