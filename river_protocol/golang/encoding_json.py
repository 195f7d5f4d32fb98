"""Go ``encoding/json`` output, byte for byte, and decoding of job args.

River stores job args as whatever Go's ``json.Marshal`` wrote, and unique keys
hash those bytes, so a Python client must produce the very same bytes for the
same logical value. This module encodes with the rules of Go's classic
encoder (Go 1.25): HTML-safe string escaping, shortest float formatting in
Go's layout, sorted map keys, RFC 3339 times, base64 ``[]byte`` and
compacted ``json.RawMessage``/``MarshalJSON`` output.

Python to Go mapping used by :func:`encode`:

* ``None`` is Go's ``nil`` (``null``). Python has no nil slice/map distinct
  from an empty one: ``[]``/``{}`` are empty, ``None`` in their place is nil.
* ``bool``, ``int`` (int64/uint64 range), ``float`` (float64),
  :class:`Float32`, ``str``, :class:`GoString` (a Go string of raw bytes,
  possibly invalid UTF-8), ``bytes``/``bytearray``/``memoryview`` (``[]byte``).
* ``list``/``tuple`` are slices; ``dict`` (any ``Mapping``) is a map with
  ``str``, :class:`GoString`, ``int`` or enum keys.
* Aware ``datetime`` and :class:`~river_protocol.golang.gotime.GoTime` are
  ``time.Time``; enum members encode as their value; dataclasses are structs
  whose fields carry :mod:`river_protocol.args` metadata.
* Anything with a ``__go_json__() -> bytes`` method is a ``json.Marshaler``;
  :class:`RawJSON` is ``json.RawMessage``.

A ``str`` holding lone surrogates (which UTF-8 cannot carry) is treated like
the Go string Python would have produced: U+DC80..U+DCFF are raw bytes escaped
by ``surrogateescape`` (one replacement each), other surrogates are their
three-byte encodings (three replacements each).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import json
import json.scanner
import re
import struct
import types
import typing
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction
from json.encoder import encode_basestring as _json_quote
from typing import Any, TypeVar

from river_protocol.args import is_omitempty, is_skipped, json_name
from river_protocol.errors import EncodingError, ValidationError
from river_protocol.golang.gotime import NS_PER_SECOND, GoTime, parse_time

__all__ = [
    "Float32",
    "GoString",
    "RawJSON",
    "decode_args",
    "encode",
    "encode_args",
    "encode_go_string",
    "format_float32",
    "format_float64",
]

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Float32:
    """A Go ``float32``: encoded with the shortest digits that round-trip in 32 bits."""

    value: float


@dataclasses.dataclass(frozen=True, slots=True)
class GoString:
    """A Go ``string`` given as its raw bytes, which need not be valid UTF-8."""

    data: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class RawJSON:
    """Go's ``json.RawMessage``: pre-encoded JSON, validated, compacted and HTML-escaped on output."""

    data: bytes

    def __go_json__(self) -> bytes:
        return self.data


# ---------------------------------------------------------------------------
# Strings

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_NEEDS_SLOW_RE = re.compile("[\u2028\u2029\ud800-\udfff]")


def _surrogate_repl(match: re.Match[str]) -> str:
    # U+DC80..U+DCFF stand for one raw byte (surrogateescape); any other lone
    # surrogate would be three invalid bytes in a Go string.
    return "\\ufffd" if 0xDC80 <= ord(match[0]) <= 0xDCFF else "\\ufffd\\ufffd\\ufffd"


def _quote(s: str) -> str:
    """The Go JSON string literal for ``s``, as text (ASCII escapes plus raw non-ASCII)."""
    q: str = _json_quote(s)
    if "<" in q:
        q = q.replace("<", "\\u003c")
    if ">" in q:
        q = q.replace(">", "\\u003e")
    if "&" in q:
        q = q.replace("&", "\\u0026")
    if not s.isascii() and _NEEDS_SLOW_RE.search(s) is not None:
        q = q.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        q = _SURROGATE_RE.sub(_surrogate_repl, q)
    return q


def _quote_go_bytes(data: bytes) -> str:
    # surrogateescape maps each byte that is not part of a valid UTF-8
    # sequence to its own surrogate, which is exactly how Go's decoder
    # advances (one RuneError per bad byte).
    return _quote(data.decode("utf-8", "surrogateescape"))


def encode_go_string(s: str | bytes) -> bytes:
    """A JSON string exactly as Go's encoder writes the Go string ``s`` (bytes: raw Go string)."""
    if isinstance(s, (bytes, bytearray, memoryview)):
        return _quote_go_bytes(bytes(s)).encode("utf-8")
    return _quote(s).encode("utf-8")


# ---------------------------------------------------------------------------
# Numbers

_INT_MIN = -(1 << 63)
_UINT_MAX = (1 << 64) - 1


def _layout(negative: bool, digits: str, exp10: int, scientific: bool) -> str:
    """Place ``digits`` x 10**``exp10`` in Go's 'f' or cleaned-up 'e' layout."""
    sign = "-" if negative else ""
    if scientific:
        sci_exp = exp10 + len(digits) - 1
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        # Go's encoder shortens e-07 to e-7 but keeps two digits for e+21.
        exp_text = f"-{-sci_exp}" if sci_exp < 0 else f"+{sci_exp:02d}"
        return f"{sign}{mantissa}e{exp_text}"
    if exp10 >= 0:
        return sign + digits + "0" * exp10
    point = len(digits) + exp10
    if point > 0:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}0.{'0' * -point}{digits}"


def _repr_digits(text: str) -> tuple[bool, str, int]:
    """(negative, significant digits, exponent) of a Python float repr."""
    negative = text.startswith("-")
    if negative:
        text = text[1:]
    mantissa, _, exp_text = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    exp10 = int(exp_text or 0) - len(frac)
    digits = (whole + frac).lstrip("0")
    stripped = digits.rstrip("0")
    exp10 += len(digits) - len(stripped)
    return negative, stripped or "0", exp10 if stripped else 0


def format_float64(x: float) -> str:
    """Go's encoding of a float64 (raises EncodingError for NaN and infinities)."""
    if x != x or x in (_INF, _NEG_INF):
        raise EncodingError(f"json: unsupported value: {_go_special(x)}")
    text = repr(x)
    if "e" not in text:
        # Python's plain range (1e-4 <= |x| < 1e16, and 0) sits inside Go's.
        return text[:-2] if text.endswith(".0") else text
    magnitude = abs(x)
    if 1e-6 <= magnitude < 1e21:
        negative, digits, exp10 = _repr_digits(text)
        return _layout(negative, digits, exp10, scientific=False)
    # Python writes at least two exponent digits, like Go's AppendFloat; Go's
    # encoder then drops the zero of a single-digit negative exponent.
    return text.replace("e-0", "e-")


_INF = float("inf")
_NEG_INF = float("-inf")


def _go_special(x: float) -> str:
    if x != x:
        return "NaN"
    return "+Inf" if x > 0 else "-Inf"


def _to_f32(x: float) -> float:
    result: float = struct.unpack("<f", struct.pack("<f", x))[0]
    return result


_F32_SMALL = _to_f32(1e-6)
_F32_LARGE = _to_f32(1e21)


def _f32_shortest(x: float) -> tuple[str, int]:
    """Shortest digits (and exponent) that read back as the float32 ``x``; closest when tied."""
    bits: int = struct.unpack("<I", struct.pack("<f", x))[0]
    exp_bits = (bits >> 23) & 0xFF
    frac = bits & 0x7FFFFF
    mant, exp2 = (frac, -149) if exp_bits == 0 else (frac | 0x800000, exp_bits - 150)
    value = Fraction(mant) * Fraction(2) ** exp2
    half_up = Fraction(2) ** exp2 / 2
    # Just above a power of two the gap below is half the gap above.
    half_down = half_up / 2 if frac == 0 and exp_bits > 1 else half_up
    low, high = value - half_down, value + half_up
    inclusive = mant % 2 == 0

    def inside(c: Fraction) -> bool:
        return low <= c <= high if inclusive else low < c < high

    for precision in range(1, 10):
        mantissa, _, exp_text = f"{x:.{precision - 1}e}".partition("e")
        nearest = int(mantissa.replace(".", ""))
        exp10 = int(exp_text) - (precision - 1)
        scale = Fraction(10) ** exp10
        best: tuple[Fraction, int] | None = None
        for n in (nearest, nearest - 1, nearest + 1):
            cand = n * scale
            if n > 0 and inside(cand):
                dist = abs(cand - value)
                if best is None or dist < best[0]:
                    best = (dist, n)
        if best is not None:
            digits = str(best[1])
            stripped = digits.rstrip("0")
            return stripped, exp10 + len(digits) - len(stripped)
    raise AssertionError(f"no float32 representation found for {x!r}")  # pragma: no cover


def format_float32(x: float) -> str:
    """Go's encoding of a float32 holding ``x`` (rounded to 32 bits first)."""
    if x != x or x in (_INF, _NEG_INF):
        raise EncodingError(f"json: unsupported value: {_go_special(x)}")
    f = _to_f32(x)
    if f in (_INF, _NEG_INF):
        raise EncodingError(f"json: unsupported value: {_go_special(f)}")
    if f == 0:
        return "-0" if struct.pack("<f", f)[3] & 0x80 else "0"
    negative = f < 0
    magnitude = abs(f)
    digits, exp10 = _f32_shortest(magnitude)
    scientific = magnitude < _F32_SMALL or magnitude >= _F32_LARGE
    return _layout(negative, digits, exp10, scientific)


def _format_int(v: int) -> str:
    if not _INT_MIN <= v <= _UINT_MAX:
        raise EncodingError(f"json: integer {v} does not fit Go's int64 or uint64")
    return int.__repr__(v)


# ---------------------------------------------------------------------------
# Times

_TIME_ERROR = "json: error calling MarshalJSON for type time.Time: Time.MarshalJSON: "


def _format_fields(
    year: int, month: int, day: int, hour: int, minute: int, second: int, nanos: int, offset: int
) -> str:
    if not 0 <= year <= 9999:
        raise EncodingError(_TIME_ERROR + "year outside of range [0,9999]")
    text = f'"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}'
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    if offset == 0:
        return text + 'Z"'
    # Go divides the offset in seconds by 60 truncating toward zero, so a
    # -30s zone prints as +00:00.
    zone = -(-offset // 60) if offset < 0 else offset // 60
    sign = "+"
    if zone < 0:
        sign, zone = "-", -zone
    if zone // 60 >= 24:
        raise EncodingError(_TIME_ERROR + "timezone hour outside of range [0,23]")
    return f'{text}{sign}{zone // 60:02d}:{zone % 60:02d}"'


def _format_gotime(t: GoTime) -> str:
    return _format_fields(*t.wall_fields(), t.utc_offset_seconds())


def _format_datetime(t: datetime) -> str:
    off = t.utcoffset()
    if off is None:
        raise EncodingError(f"json: naive datetime {t!r} has no location; use a timezone-aware datetime")
    if isinstance(t.tzinfo, timezone):
        # A fixed offset has no gaps or folds: the wall clock is the datetime's own.
        offset = off.days * 86400 + off.seconds
        return _format_fields(
            t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond * 1000, offset
        )
    # Zones with transitions: go through the instant, as Go normalises times in gaps.
    return _format_gotime(GoTime.from_datetime(t))


# ---------------------------------------------------------------------------
# Marshalers and raw JSON

_WS_RE = re.compile(rb"[ \t\n\r]")
_STRING_OR_WS_RE = re.compile(rb'("[^"\\]*(?:\\.[^"\\]*)*")|[ \t\n\r]+', re.DOTALL)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid character {name[0]!r} looking for beginning of value")


# Numbers stay text (no int digit limit, no float work); NaN/Infinity are not JSON.
_STRICT_DECODER = json.JSONDecoder(parse_float=str, parse_int=str, parse_constant=_reject_constant)


def _compact(data: bytes, type_name: str) -> str:
    """Validate ``data`` as JSON and return it compacted with Go's HTML escaping applied."""
    text = data.decode("utf-8", "surrogateescape")
    try:
        _STRICT_DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        detail = "unexpected end of JSON input" if not data.strip(b" \t\r\n") else str(exc)
        raise EncodingError(f"json: error calling MarshalJSON for type {type_name}: {detail}") from None
    if _WS_RE.search(data) is not None:
        data = _STRING_OR_WS_RE.sub(rb"\1", data)
    # Valid JSON can only hold these inside strings, so a blanket replace is exact.
    if b"<" in data:
        data = data.replace(b"<", b"\\u003c")
    if b">" in data:
        data = data.replace(b">", b"\\u003e")
    if b"&" in data:
        data = data.replace(b"&", b"\\u0026")
    if b"\xe2\x80" in data:
        data = data.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    # Raw JSON may carry invalid UTF-8 inside strings (Go passes it through);
    # surrogateescape keeps those bytes intact until the final encode.
    return data.decode("utf-8", "surrogateescape")


def _type_name(v: Any) -> str:
    if isinstance(v, RawJSON):
        return "json.RawMessage"
    return type(v).__qualname__


# ---------------------------------------------------------------------------
# The encoder

_Encoder = Callable[[Any, list[str]], None]
_ENCODERS: dict[type, _Encoder] = {}


def _enc(v: Any, out: list[str]) -> None:
    fn = _ENCODERS.get(type(v))
    if fn is None:
        fn = _resolve(type(v))
        _ENCODERS[type(v)] = fn
    fn(v, out)


def _enc_none(v: Any, out: list[str]) -> None:
    out.append("null")


def _enc_bool(v: Any, out: list[str]) -> None:
    out.append("true" if v else "false")


def _enc_int(v: Any, out: list[str]) -> None:
    out.append(_format_int(v))


def _enc_float(v: Any, out: list[str]) -> None:
    out.append(format_float64(float(v)))


def _enc_float32(v: Any, out: list[str]) -> None:
    out.append(format_float32(v.value))


def _enc_str(v: Any, out: list[str]) -> None:
    out.append(_quote(v))


def _enc_gostring(v: Any, out: list[str]) -> None:
    out.append(_quote_go_bytes(v.data))


def _enc_bytes(v: Any, out: list[str]) -> None:
    out.append('"' + base64.b64encode(v).decode("ascii") + '"')


def _enc_list(v: Any, out: list[str]) -> None:
    if not v:
        out.append("[]")
        return
    out.append("[")
    first = True
    for item in v:
        if not first:
            out.append(",")
        first = False
        _enc(item, out)
    out.append("]")


def _map_key(k: Any) -> tuple[bytes, str]:
    """(sort bytes, quoted key) for one map key, following Go's key resolution."""
    if isinstance(k, enum.Enum):
        return _map_key(k.value)
    if isinstance(k, str):
        return k.encode("utf-8", "surrogatepass"), _quote(k)
    if isinstance(k, GoString):
        return k.data, _quote_go_bytes(k.data)
    if isinstance(k, int) and not isinstance(k, bool):
        text = _format_int(k)
        return text.encode("ascii"), '"' + text + '"'
    raise EncodingError(f"json: unsupported type: map key of type {type(k).__qualname__}")


def _sort_bytes(item: tuple[tuple[bytes, str], Any]) -> bytes:
    return item[0][0]


def _enc_map(v: Any, out: list[str]) -> None:
    if not v:
        out.append("{}")
        return
    if all(type(k) is str for k in v):
        # Code point order equals Go's UTF-8 byte order for str keys.
        items = [(_quote(k), v[k]) for k in sorted(v)]
    else:
        keyed = sorted(((_map_key(k), val) for k, val in v.items()), key=_sort_bytes)
        items = [(quoted, val) for (_, quoted), val in keyed]
    out.append("{")
    first = True
    for quoted, val in items:
        out.append(quoted + ":" if first else "," + quoted + ":")
        first = False
        _enc(val, out)
    out.append("}")


def _enc_time(v: Any, out: list[str]) -> None:
    out.append(_format_datetime(v))


def _enc_gotime(v: Any, out: list[str]) -> None:
    out.append(_format_gotime(v))


def _enc_enum(v: Any, out: list[str]) -> None:
    _enc(v.value, out)


def _enc_marshaler(v: Any, out: list[str]) -> None:
    data = v.__go_json__()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise EncodingError(
            f"json: error calling MarshalJSON for type {_type_name(v)}: "
            f"__go_json__ returned {type(data).__qualname__}, not bytes"
        )
    out.append(_compact(bytes(data), _type_name(v)))


_StructField = tuple[str, str, bool]
_STRUCTS: dict[type, list[_StructField]] = {}


def _struct_fields(cls: type) -> list[_StructField]:
    fields = _STRUCTS.get(cls)
    if fields is None:
        fields = [
            (_quote(json_name(f)) + ":", f.name, is_omitempty(f))
            for f in dataclasses.fields(cls)
            if not is_skipped(f)
        ]
        _STRUCTS[cls] = fields
    return fields


def _is_empty(v: Any) -> bool:
    """Go's omitempty test: false, 0, "", nil, and empty slices/maps/strings."""
    if v is None or v is False:
        return True
    if isinstance(v, (str, bytes, bytearray, list, tuple, dict, Mapping)):
        return len(v) == 0
    if isinstance(v, (int, float)):
        return v == 0
    if isinstance(v, enum.Enum):
        return _is_empty(v.value)
    if isinstance(v, (GoString, RawJSON)):
        return len(v.data) == 0
    if isinstance(v, Float32):
        return v.value == 0
    return False


def _enc_struct(v: Any, out: list[str]) -> None:
    out.append("{")
    first = True
    for key, attr, omitempty in _struct_fields(type(v)):
        val = getattr(v, attr)
        if omitempty and _is_empty(val):
            continue
        out.append(key if first else "," + key)
        first = False
        _enc(val, out)
    out.append("}")


def _unsupported(v: Any, out: list[str]) -> None:
    raise EncodingError(f"json: unsupported type: {type(v).__qualname__}")


def _resolve(t: type) -> _Encoder:
    # Go consults Marshaler before the value's kind; enums come next because
    # an IntEnum/StrEnum is also an int/str.
    if callable(getattr(t, "__go_json__", None)):
        return _enc_marshaler
    if issubclass(t, enum.Enum):
        return _enc_enum
    if dataclasses.is_dataclass(t):
        specials: tuple[tuple[type, _Encoder], ...] = (
            (Float32, _enc_float32), (GoString, _enc_gostring), (GoTime, _enc_gotime),
        )
        for special, special_fn in specials:
            if issubclass(t, special):
                return special_fn
        return _enc_struct
    checks: tuple[tuple[type | tuple[type, ...], _Encoder], ...] = (
        (bool, _enc_bool),
        (int, _enc_int),
        (float, _enc_float),
        (str, _enc_str),
        ((bytes, bytearray, memoryview), _enc_bytes),
        ((list, tuple), _enc_list),
        (Mapping, _enc_map),
        (datetime, _enc_time),
    )
    for kind, fn in checks:
        if issubclass(t, kind):
            return fn
    return _unsupported


_ENCODERS.update({
    type(None): _enc_none,
    bool: _enc_bool,
    int: _enc_int,
    float: _enc_float,
    str: _enc_str,
    bytes: _enc_bytes,
    list: _enc_list,
    tuple: _enc_list,
    dict: _enc_map,
    GoString: _enc_gostring,
    Float32: _enc_float32,
    RawJSON: _enc_marshaler,
    GoTime: _enc_gotime,
})


def encode(value: Any) -> bytes:
    """``json.Marshal`` of the Go value that ``value`` stands for (see the module docstring)."""
    out: list[str] = []
    try:
        _enc(value, out)
    except RecursionError:
        raise EncodingError("json: unsupported value: nesting too deep (a cycle?)") from None
    return "".join(out).encode("utf-8", "surrogateescape")


def encode_args(args: Any) -> bytes:
    """The ``river_job.args`` bytes of a job args value; it must encode to a JSON object."""
    data = encode(args)
    if not data.startswith(b"{"):
        raise EncodingError(
            f"job args of type {type(args).__qualname__} encode to {data[:40]!r}, not a JSON object"
        )
    return data


# ---------------------------------------------------------------------------
# Decoding

_ESCAPED_SURROGATE_RE = re.compile(r"\\u[dD][89a-fA-F]")
_json_decode_general = json.JSONDecoder().decode  # json.loads of a str, without its argument checks
# The C scanner decode() calls once it has skipped whitespace with a regex on each side; a
# value that fills the whole text (what both databases hand back) needs neither regex.
_scan_once: Any = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _json_decode(text: str) -> Any:
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:
        return _json_decode_general(text)  # leading whitespace, or not JSON: decode() says which
    if end != len(text):
        return _json_decode_general(text)  # trailing whitespace or extra data, likewise
    return value
_NONE_TYPE = type(None)


def _clean(value: Any) -> Any:
    """Go's decoder turns invalid UTF-8 and lone surrogate escapes into U+FFFD, one per unit."""
    if isinstance(value, str):
        return _SURROGATE_RE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


def _loads(data: bytes | str, what: str) -> Any:
    if data.__class__ is bytes:
        # What a claim hands over, taken in one scan: valid UTF-8, one JSON value, no escaped
        # surrogate. Anything else goes through the steps below, which decode it again and so
        # give exactly their value or their error.
        try:
            text = data.decode()
            value, end = _scan_once(text, 0)
        except (UnicodeDecodeError, StopIteration, ValueError, RecursionError):
            pass
        else:
            if end == len(text) and ("\\u" not in text or _ESCAPED_SURROGATE_RE.search(text) is None):
                return value
    if isinstance(data, str):
        text, needs_clean = data, not data.isascii() and _SURROGATE_RE.search(data) is not None
    else:
        raw = data if data.__class__ is bytes else bytes(data)
        try:
            text, needs_clean = raw.decode("utf-8"), False
        except UnicodeDecodeError:
            text, needs_clean = raw.decode("utf-8", "surrogateescape"), True
    try:
        value = _json_decode(text)
    except (ValueError, RecursionError) as exc:
        raise ValidationError(f"{what}: not valid JSON: {exc}") from None
    if needs_clean or ("\\u" in text and _ESCAPED_SURROGATE_RE.search(text) is not None):
        value = _clean(value)
    return value


# Per args type: its decode hook (or None) and the names its errors use, looked up on its
# first decode instead of by two getattr calls per job.
_ARGS_TYPES: dict[Any, tuple[Any, str, str]] = {}


def decode_args(args_type: type[T], data: bytes | str) -> T:
    """Build ``args_type`` from encoded args the way Go's ``json.Unmarshal`` fills a struct.

    Members match fields by JSON name (exactly, else case-insensitively, like
    Go); unknown members are ignored; missing members and ``null`` keep the
    field's default (or its zero value). ``__go_json_decode__(data)`` on the
    class (looked up once, at the type's first decode) takes over entirely (for
    a nested value it receives that value
    re-encoded by :func:`encode`). Numbers decoded into ``Any`` stay Python
    ``int``/``float`` rather than becoming float64 as in Go.
    """
    known = _ARGS_TYPES.get(args_type)
    if known is None:
        name = getattr(args_type, "__qualname__", None) or repr(args_type)
        known = (getattr(args_type, "__go_json_decode__", None), name, f"args for {name}")
        _ARGS_TYPES[args_type] = known
    hook, name, what = known
    if hook is not None:
        result: T = hook(bytes(data) if not isinstance(data, str) else data.encode())
        return result
    value = _loads(data, what)
    if value is None:
        value = {}
    if value.__class__ is dict and args_type in _PLAIN_STRUCTS:
        # A class _convert_class has already sent to _decode_struct: straight there.
        struct: T = _decode_struct(args_type, value, name)
        return struct
    converted: T = _convert(value, args_type, name)
    return converted


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        try:
            hints = typing.get_type_hints(cls)
        except (NameError, TypeError) as exc:
            raise ValidationError(f"cannot resolve the type hints of {cls.__qualname__}: {exc}") from None
        _HINTS[cls] = hints
    return hints


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    kind = {bool: "bool", int: "number", float: "number", str: "string", list: "array", dict: "object"}
    return f"{kind.get(type(value), type(value).__qualname__)} {json.dumps(value)[:60]}"


def _mismatch(value: Any, hint: Any, path: str) -> ValidationError:
    return ValidationError(f"{path}: cannot decode JSON {_describe(value)} into {_hint_name(hint)}")


def _hint_name(hint: Any) -> str:
    return getattr(hint, "__qualname__", None) or str(hint)


def _nullable(hint: Any) -> bool:
    if hint is Any or hint is object or hint is _NONE_TYPE or hint is None:
        return True
    origin = typing.get_origin(hint)
    return (origin is typing.Union or origin is types.UnionType) and _NONE_TYPE in typing.get_args(hint)


_NO_ZERO = object()


def _zero(hint: Any) -> Any:
    """Go's zero value for a field of this type, or _NO_ZERO when there is no sensible one."""
    if _nullable(hint):
        return None
    origin = typing.get_origin(hint) or hint
    zeros: dict[Any, Any] = {str: "", int: 0, float: 0.0, bool: False, bytes: b"", Float32: Float32(0.0)}
    if origin in zeros:
        return zeros[origin]
    if origin is list or origin in _ABC_SEQUENCES:
        return []
    if origin in (tuple, set, frozenset):
        return origin()
    if origin is dict or origin in _ABC_MAPPINGS:
        return {}
    if isinstance(origin, type) and dataclasses.is_dataclass(origin):
        return _decode_struct(origin, {}, _hint_name(origin))
    return _NO_ZERO


_GOTIME_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z"
)


def parse_gotime(text: str) -> GoTime:
    """An RFC 3339 time as Go's ``time.Time`` reads it, nanoseconds and offset kept."""
    return _parse_gotime(text, "time")


def _parse_gotime(text: str, path: str) -> GoTime:
    m = _GOTIME_RE.match(text)
    if m is None:
        raise ValidationError(f"{path}: {text!r} is not an RFC 3339 time")
    y, mo, d, h, mi, s, frac, z, sign, oh, om = m.groups()
    try:
        wall = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC)
    except ValueError as exc:
        raise ValidationError(f"{path}: {text!r} is not an RFC 3339 time: {exc}") from None
    offset = 0 if z else (int(oh) * 3600 + int(om) * 60) * (-1 if sign == "-" else 1)
    seconds = int((wall - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) - offset
    nanos = int((frac or "").ljust(9, "0") or 0)
    tz = UTC if offset == 0 else timezone(timedelta(seconds=offset))
    return GoTime(seconds * NS_PER_SECOND + nanos, tz)


def _convert(value: Any, hint: Any, path: str) -> Any:
    if hint is Any or hint is object:
        return value
    if value is None:
        if _nullable(hint):
            return None
        zero = _zero(hint)
        if zero is _NO_ZERO:
            raise _mismatch(value, hint, path)
        return zero
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        members = [m for m in typing.get_args(hint) if m is not _NONE_TYPE]
        errors: list[str] = []
        for member in members:
            try:
                return _convert(value, member, path)
            except ValidationError as exc:
                errors.append(str(exc))
        raise ValidationError("; ".join(errors) or f"{path}: no type accepts {_describe(value)}")
    if origin is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise _mismatch(value, hint, path)
    if origin is not None:
        return _convert_generic(value, hint, origin, path)
    if not isinstance(hint, type):
        raise ValidationError(f"{path}: unsupported type hint {hint!r}")
    return _convert_class(value, hint, path)


def _convert_generic(value: Any, hint: Any, origin: Any, path: str) -> Any:
    params = typing.get_args(hint)
    if origin in (list, set, frozenset) or origin in _ABC_SEQUENCES:
        if not isinstance(value, list):
            raise _mismatch(value, hint, path)
        item = params[0] if params else Any
        items = [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
        return origin(items) if origin in (set, frozenset) else items
    if origin is tuple:
        if not isinstance(value, list):
            raise _mismatch(value, hint, path)
        if len(params) == 2 and params[1] is Ellipsis:
            return tuple(_convert(v, params[0], f"{path}[{i}]") for i, v in enumerate(value))
        if params and len(params) != len(value):
            raise ValidationError(f"{path}: expected {len(params)} items, got {len(value)}")
        return tuple(
            _convert(v, params[i] if params else Any, f"{path}[{i}]") for i, v in enumerate(value)
        )
    if origin in (dict,) or origin in _ABC_MAPPINGS:
        if not isinstance(value, dict):
            raise _mismatch(value, hint, path)
        key_hint, val_hint = params if len(params) == 2 else (Any, Any)
        return {
            _convert_key(k, key_hint, path): _convert(v, val_hint, f"{path}[{k!r}]")
            for k, v in value.items()
        }
    if isinstance(origin, type):
        return _convert_class(value, origin, path)
    raise ValidationError(f"{path}: unsupported type hint {hint!r}")


_ABC_SEQUENCES: tuple[Any, ...] = (
    typing.get_origin(typing.Sequence[int]),
    typing.get_origin(typing.MutableSequence[int]),
)
_ABC_MAPPINGS: tuple[Any, ...] = (
    typing.get_origin(typing.Mapping[str, int]),
    typing.get_origin(typing.MutableMapping[str, int]),
)


def _convert_key(key: str, hint: Any, path: str) -> Any:
    if hint is Any or hint is str or hint is object:
        return key
    if hint is int:
        try:
            return int(key)
        except ValueError:
            raise ValidationError(f"{path}: map key {key!r} is not an integer") from None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        member_type = type(next(iter(hint)).value) if len(hint) else str
        return _convert_class(_convert_key(key, member_type, path), hint, path)
    if hint is GoString:
        return GoString(key.encode("utf-8", "surrogatepass"))
    raise ValidationError(f"{path}: unsupported map key type {_hint_name(hint)}")


def _convert_class(value: Any, cls: type, path: str) -> Any:
    decode_hook = getattr(cls, "__go_json_decode__", None)
    if decode_hook is not None:
        return decode_hook(encode(value))
    if cls is bool:
        if type(value) is bool:
            return value
        raise _mismatch(value, cls, path)
    if cls is int:
        if type(value) is int:
            return value
        raise _mismatch(value, cls, path)
    if cls is float:
        if type(value) in (int, float):
            return float(value)
        raise _mismatch(value, cls, path)
    if cls is str:
        if type(value) is str:
            return value
        raise _mismatch(value, cls, path)
    if cls in (bytes, bytearray):
        if type(value) is not str:
            raise _mismatch(value, cls, path)
        try:
            raw = base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
        except (binascii.Error, ValueError):
            raise ValidationError(f"{path}: {value[:60]!r} is not standard base64") from None
        return cls(raw)
    if issubclass(cls, enum.Enum):
        try:
            return cls(value)
        except ValueError:
            raise ValidationError(f"{path}: {value!r} is not a valid {cls.__qualname__}") from None
    if cls is Float32:
        return Float32(_convert_class(value, float, path))
    if cls is GoString:
        return GoString(_convert_class(value, str, path).encode("utf-8", "surrogatepass"))
    if cls is RawJSON:
        return RawJSON(encode(value))
    if cls is GoTime:
        return _parse_gotime(_convert_class(value, str, path), path)
    if issubclass(cls, datetime):
        return parse_time(_convert_class(value, str, path))
    if dataclasses.is_dataclass(cls):
        if not isinstance(value, dict):
            raise _mismatch(value, cls, path)
        _PLAIN_STRUCTS.add(cls)
        return _decode_struct(cls, value, path)
    if cls in (list, tuple, dict, set, frozenset):
        return _convert_generic(value, cls, cls, path)
    if isinstance(value, cls):
        return value
    raise _mismatch(value, cls, path)


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldSpec:
    attr: str
    hint: Any
    has_default: bool
    decodable: bool
    nullable: bool = False
    # For a bool, int or str field: that type, whose values are taken as they are (no conversion).
    exact_type: type | None = None


# Dataclasses that reach _decode_struct through every check of _convert_class: what they are
# decides that, never the value, so decode_args can skip those checks next time.
_PLAIN_STRUCTS: set[type] = set()
_DECODE_SPECS: dict[type, tuple[dict[str, _FieldSpec], dict[str, _FieldSpec], list[_FieldSpec]]] = {}


def _decode_spec(cls: type) -> tuple[dict[str, _FieldSpec], dict[str, _FieldSpec], list[_FieldSpec]]:
    spec = _DECODE_SPECS.get(cls)
    if spec is None:
        hints = _hints(cls)
        exact: dict[str, _FieldSpec] = {}
        folded: dict[str, _FieldSpec] = {}
        all_specs: list[_FieldSpec] = []
        for f in dataclasses.fields(cls):
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            hint = hints.get(f.name, Any)
            fs = _FieldSpec(f.name, hint, has_default, f.init and not is_skipped(f), _nullable(hint),
                            hint if hint in (bool, int, str) else None)
            all_specs.append(fs)
            if not fs.decodable:
                continue
            name = json_name(f)
            exact.setdefault(name, fs)
            folded.setdefault(name.casefold(), fs)
        spec = (exact, folded, all_specs)
        _DECODE_SPECS[cls] = spec
    return spec


def _decode_struct(cls: type, obj: dict[str, Any], path: str) -> Any:
    exact, folded, all_specs = _decode_spec(cls)
    kwargs: dict[str, Any] = {}
    for key, val in obj.items():
        fs = exact.get(key) or folded.get(key.casefold())
        if fs is None:
            continue
        if val.__class__ is fs.exact_type:
            kwargs[fs.attr] = val  # what _convert returns for it, without the path or the dispatch
            continue
        if val is None and fs.has_default and not fs.nullable:
            continue
        kwargs[fs.attr] = _convert(val, fs.hint, f"{path}.{key}")
    for fs in all_specs:
        if fs.decodable and not fs.has_default and fs.attr not in kwargs:
            zero = _zero(fs.hint)
            if zero is _NO_ZERO:
                raise ValidationError(f"{path}: missing member for required field {fs.attr!r}")
            kwargs[fs.attr] = zero
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValidationError(f"{path}: cannot build {cls.__qualname__}: {exc}") from None
