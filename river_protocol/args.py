"""How a Python class describes River job args.

A job args type is usually a dataclass with a ``kind`` class attribute.
Field-level JSON naming, ``omitempty`` and River's ``river:"unique"`` tag are
declared with ``arg_field``; the Go-compatible encoder
(``golang.encoding_json``) and the unique-key builder (``unique``) both read
this metadata, so a Python args type encodes and dedupes exactly like the Go
struct it mirrors::

    @dataclass
    class SendEmail:
        kind: ClassVar[str] = "send_email"
        customer_id: int = arg_field(json="customer_id", unique=True)
        note: str = arg_field(omitempty=True, default="")
"""

from __future__ import annotations

import dataclasses
from typing import Any

JSON_NAME = "river.json"  # str: the JSON member name (Go's json tag name)
OMITEMPTY = "river.omitempty"  # bool: Go's ",omitempty"
UNIQUE = "river.unique"  # bool: Go's river:"unique"
SKIP = "river.skip"  # bool: Go's json:"-"


def arg_field(
    *,
    json: str | None = None,
    unique: bool = False,
    omitempty: bool = False,
    skip: bool = False,
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field carrying River/Go JSON metadata."""
    metadata: dict[str, Any] = {UNIQUE: unique, OMITEMPTY: omitempty, SKIP: skip}
    if json is not None:
        metadata[JSON_NAME] = json
    if default is not dataclasses.MISSING:
        return dataclasses.field(default=default, metadata=metadata)
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(metadata=metadata)


def json_name(f: dataclasses.Field[Any]) -> str:
    """The JSON member name of a dataclass field (its Python name unless renamed)."""
    return str(f.metadata.get(JSON_NAME, f.name))


def is_unique(f: dataclasses.Field[Any]) -> bool:
    return bool(f.metadata.get(UNIQUE, False))


def is_omitempty(f: dataclasses.Field[Any]) -> bool:
    return bool(f.metadata.get(OMITEMPTY, False))


def is_skipped(f: dataclasses.Field[Any]) -> bool:
    return bool(f.metadata.get(SKIP, False))


def kind_of(args: Any) -> str:
    """The job kind of an args value or type (its ``kind`` attribute)."""
    kind = getattr(args, "kind", None)
    if not isinstance(kind, str) or not kind:
        from river_protocol.errors import ValidationError

        raise ValidationError(f"{type(args).__name__} has no 'kind' attribute naming its job kind")
    return kind
