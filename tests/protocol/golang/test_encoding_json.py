from __future__ import annotations

import base64
import enum
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.families import go_json as family
from conformance.runner import DEFAULT_FIXTURES
from river_protocol.args import arg_field
from river_protocol.errors import EncodingError, ValidationError
from river_protocol.golang.encoding_json import (
    Float32,
    GoString,
    RawJSON,
    decode_args,
    encode,
    encode_args,
    encode_go_string,
    format_float32,
    format_float64,
)
from river_protocol.golang.gotime import GoTime

# ---------------------------------------------------------------------------
# A deliberately naive reference of Go's string encoder, byte by byte.


def _go_decode_rune(b: bytes, i: int) -> tuple[int | None, int]:
    """(code point or None for RuneError, size) following utf8.DecodeRune."""
    c = b[i]
    if c < 0x80:
        return c, 1
    second_ranges = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}
    if 0xC2 <= c <= 0xDF:
        size = 2
    elif 0xE0 <= c <= 0xEF:
        size = 3
    elif 0xF0 <= c <= 0xF4:
        size = 4
    else:
        return None, 1
    if i + size > len(b):
        return None, 1
    lo, hi = second_ranges.get(c, (0x80, 0xBF))
    if not lo <= b[i + 1] <= hi:
        return None, 1
    if any(not 0x80 <= x <= 0xBF for x in b[i + 2 : i + size]):
        return None, 1
    return ord(b[i : i + size].decode("utf-8")), size


def reference_go_string(raw: bytes) -> bytes:
    out = ['"']
    short = {0x22: '\\"', 0x5C: "\\\\", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x08: "\\b", 0x0C: "\\f"}
    i = 0
    while i < len(raw):
        cp, size = _go_decode_rune(raw, i)
        i += size
        if cp is None:
            out.append("\\ufffd")
        elif cp in short:
            out.append(short[cp])
        elif cp < 0x20 or cp in (0x3C, 0x3E, 0x26):
            out.append(f"\\u00{cp:02x}")
        elif cp in (0x2028, 0x2029):
            out.append(f"\\u{cp:04x}")
        else:
            out.append(chr(cp))
    out.append('"')
    return "".join(out).encode("utf-8")


def go_bytes_of(s: str) -> bytes:
    """The Go string a Python str stands for (lone surrogates as documented in encoding_json)."""
    parts = []
    for ch in s:
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            parts.append(bytes([ord(ch) - 0xDC00]))
        else:
            parts.append(ch.encode("utf-8", "surrogatepass"))
    return b"".join(parts)


# ---------------------------------------------------------------------------
# Strings


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('"', b'"\\""'),
        ("\\", b'"\\\\"'),
        ("\n\r\t\b\f", b'"\\n\\r\\t\\b\\f"'),
        ("\x00\x01\x1f", b'"\\u0000\\u0001\\u001f"'),
        ("\x1b", b'"\\u001b"'),
        ("<a>&", b'"\\u003ca\\u003e\\u0026"'),
        ("\u2028\u2029", b'"\\u2028\\u2029"'),
        ("\x7f", b'"\x7f"'),
        ("é日😀", '"é日😀"'.encode()),
        ("/", b'"/"'),
        ("", b'""'),
    ],
)
def test_encode_go_string_escapes_like_go(text: str, want: bytes) -> None:
    assert encode_go_string(text) == want


def test_invalid_utf8_bytes_become_one_replacement_each() -> None:
    assert encode_go_string(b"a\x80b") == b'"a\\ufffdb"'
    assert encode_go_string(b"\xe2\x82") == b'"\\ufffd\\ufffd"'
    assert encode_go_string(b"\xed\xa0\x80") == b'"\\ufffd\\ufffd\\ufffd"'
    assert encode_go_string(b"\xf0(\x8c\xbc") == b'"\\ufffd(\\ufffd\\ufffd"'
    assert encode(GoString(b"ok\xffok")) == b'"ok\\ufffdok"'


def test_lone_surrogates_in_str() -> None:
    assert encode_go_string("a\udcffb") == b'"a\\ufffdb"'
    assert encode_go_string("\ud800") == b'"\\ufffd\\ufffd\\ufffd"'


@given(st.binary(max_size=40))
def test_bytes_strings_match_reference(raw: bytes) -> None:
    assert encode_go_string(raw) == reference_go_string(raw)


_ANY_CHAR = st.characters(codec=None, exclude_categories=())


@given(st.text(alphabet=st.one_of(_ANY_CHAR, st.sampled_from('<>&"\\\n\u2028\u2029\x00\x7f')), max_size=40))
def test_text_strings_match_reference(s: str) -> None:
    assert encode_go_string(s) == reference_go_string(go_bytes_of(s))


@given(st.text())
def test_strings_parse_back(s: str) -> None:
    assert json.loads(encode_go_string(s)) == s.replace("\u2028", "\u2028")


# ---------------------------------------------------------------------------
# Numbers


@pytest.mark.parametrize(
    ("x", "want"),
    [
        (0.0, "0"),
        (-0.0, "-0"),
        (1.0, "1"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.2345678901234566e-07, "1.2345678901234566e-7"),
        (1e-10, "1e-10"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (-1.4919184009523543e23, "-1.4919184009523543e+23"),
        (-4.910287312641099e17, "-491028731264109900"),
        (1.3566947758579976e-06, "0.0000013566947758579976"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (9007199254740993.0, "9007199254740992"),
    ],
)
def test_float64_layout(x: float, want: str) -> None:
    assert format_float64(x) == want
    assert encode(x) == want.encode()


@pytest.mark.parametrize(("x", "word"), [(math.nan, "NaN"), (math.inf, "+Inf"), (-math.inf, "-Inf")])
def test_non_finite_floats_fail(x: float, word: str) -> None:
    with pytest.raises(EncodingError, match=re.escape(f"json: unsupported value: {word}")):
        encode(x)
    with pytest.raises(EncodingError):
        encode(Float32(x))
    with pytest.raises(EncodingError):
        encode({"x": [x]})


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float64_round_trips_in_go_layout(x: float) -> None:
    text = format_float64(x)
    assert float(text) == x
    assert math.copysign(1, float(text)) == math.copysign(1, x)
    magnitude = abs(x)
    scientific = magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21)
    assert ("e" in text) == scientific
    if scientific:
        assert re.fullmatch(r"-?\d(\.\d+)?e(-[1-9]\d*|\+\d{2,3})", text), text
    else:
        assert re.fullmatch(r"-?\d+(\.\d*[1-9])?", text), text
    # Same significant digits as Python's shortest repr.
    digits = re.sub(r"e.*|[-.]", "", text).strip("0")
    want = re.sub(r"e.*|[-.]", "", repr(x)).strip("0")
    assert digits == want


@pytest.mark.parametrize(
    ("x", "want"),
    [
        (0.1, "0.1"),
        (0.3, "0.3"),
        (1.5, "1.5"),
        (16777216.0, "16777216"),
        (3.4028234663852886e38, "3.4028235e+38"),
        (1e-7, "1e-7"),
        (1e21, "1e+21"),
        (1.1754943508222875e-38, "1.1754944e-38"),
        (1e-45, "1e-45"),
        (math.pi, "3.1415927"),
        (-0.0, "-0"),
        (1e-6, "0.000001"),
    ],
)
def test_float32_layout(x: float, want: str) -> None:
    assert format_float32(x) == want
    assert encode(Float32(x)) == want.encode()


def _f32_of_decimal(text: str) -> float:
    """Exact round-half-even of a decimal string to float32 (no double rounding through float64)."""
    q = Fraction(Decimal(text))
    if q == 0:
        return 0.0
    sign, q = (-1 if q < 0 else 1), abs(q)
    exp2 = max(q.numerator.bit_length() - q.denominator.bit_length(), -126)
    while Fraction(2) ** exp2 > q and exp2 > -126:
        exp2 -= 1
    scale = Fraction(2) ** (exp2 - 23)
    n = round(q / scale)  # Fraction rounding is half-to-even
    value = n * scale
    return sign * (math.inf if value >= Fraction(2) ** 128 else float(value))


@settings(deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float32_shortest_round_trip(x: float) -> None:
    text = format_float32(x)
    assert _f32_of_decimal(text) == x
    digits = re.sub(r"e.*|[-.]", "", text).strip("0") or "0"
    if len(digits) > 1:
        # No decimal with one digit fewer reads back as the same float32.
        p = len(digits) - 1
        mantissa, _, exp_text = f"{abs(x):.{p - 1}e}".partition("e")
        nearest = int(mantissa.replace(".", ""))
        for n in (nearest - 1, nearest, nearest + 1):
            assert abs(_f32_of_decimal(f"{n}e{int(exp_text) - (p - 1)}")) != abs(x)


@pytest.mark.parametrize(
    ("x", "want"),
    [(0, b"0"), (-1, b"-1"), (2**63 - 1, b"9223372036854775807"), (-(2**63), b"-9223372036854775808"),
     (2**64 - 1, b"18446744073709551615")],
)
def test_ints(x: int, want: bytes) -> None:
    assert encode(x) == want


@pytest.mark.parametrize("x", [2**64, -(2**63) - 1])
def test_ints_out_of_go_range_fail(x: int) -> None:
    with pytest.raises(EncodingError, match="int64 or uint64"):
        encode(x)


def test_bools_and_null() -> None:
    assert encode(True) == b"true"
    assert encode(False) == b"false"
    assert encode(None) == b"null"


# ---------------------------------------------------------------------------
# Bytes, slices, maps


def test_bytes_are_base64_and_nil_is_null() -> None:
    assert encode(b"hello") == b'"aGVsbG8="'
    assert encode(bytearray(b"\xff\xfe\xfd")) == b'"//79"'
    assert encode(b"") == b'""'
    assert encode({"b": None, "e": b""}) == b'{"b":null,"e":""}'


def test_slices_and_nil() -> None:
    assert encode([]) == b"[]"
    assert encode(()) == b"[]"
    assert encode([1, "two", None, True, 1.5, 1e21]) == b'[1,"two",null,true,1.5,1e+21]'


def test_map_keys_sorted_by_utf8_bytes_and_escaped() -> None:
    value = {"b": 1, "a": 2, "B": 3, "_": 4, "é": 7, "z": 8, "": 9, "😀": 10, "日": 11, "<k>": 0}
    assert encode(value) == (
        '{"":9,"\\u003ck\\u003e":0,"B":3,"_":4,"a":2,"b":1,"z":8,"é":7,"日":11,"😀":10}'.encode()
    )


def test_int_keys_sort_as_strings() -> None:
    assert encode({-1: "m", 0: "z", 9: "n", 10: "t", 100: "h"}) == (
        b'{"-1":"m","0":"z","10":"t","100":"h","9":"n"}'
    )


def test_gostring_keys_sort_by_raw_bytes() -> None:
    assert encode({GoString(b"bad\xffkey"): 2, "bad": 1}) == b'{"bad":1,"bad\\ufffdkey":2}'


@pytest.mark.parametrize("key", [1.5, True, (1, 2)])
def test_unsupported_map_keys_fail(key: Any) -> None:
    with pytest.raises(EncodingError, match="map key"):
        encode({key: 1, "a": 2})


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False), st.text(),
)
_JSONABLE = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float):
        # Go writes integral floats without a point, so they read back as ints.
        return isinstance(got, (int, float)) and not isinstance(got, bool) and float(got) == want
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(map(_same, got, want))
    if isinstance(want, dict):
        return (
            isinstance(got, dict) and got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
        )
    return type(got) is type(want) and got == want


@given(_JSONABLE)
def test_encoded_values_parse_back(value: Any) -> None:
    assert _same(json.loads(encode(value)), value)


@given(st.dictionaries(st.text(max_size=6), st.integers(-100, 100), max_size=8), st.randoms())
def test_map_output_ignores_insertion_order(value: dict[str, int], rnd: Any) -> None:
    items = list(value.items())
    rnd.shuffle(items)
    assert encode(dict(items)) == encode(value)
    keys = list(json.loads(encode(value)))
    assert keys == sorted(keys, key=lambda k: k.encode())


# ---------------------------------------------------------------------------
# Raw JSON and marshalers


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (b'{"b": 1, "a": [1, 2]}', b'{"b":1,"a":[1,2]}'),
        (b'{\n  "k" : "<v>&"\n}', b'{"k":"\\u003cv\\u003e\\u0026"}'),
        (b'"\\u00e9"', b'"\\u00e9"'),
        (b"1.50", b"1.50"),
        (b"-0", b"-0"),
        ('"a\u2028b"'.encode(), b'"a\\u2028b"'),
        (b' "keep  spaces" ', b'"keep  spaces"'),
        (b'"\\" \\\\"', b'"\\" \\\\"'),
        (b'{"a":1,"a":2}', b'{"a":1,"a":2}'),
        (b'"\xff"', b'"\xff"'),
    ],
)
def test_raw_json_is_compacted_and_html_escaped(raw: bytes, want: bytes) -> None:
    assert encode(RawJSON(raw)) == want


@pytest.mark.parametrize(
    "raw", [b"", b"   ", b"{bad json}", b"NaN", b"[1,]", b"1 2", b'"\x01"', b"\xef\xbb\xbf1"]
)
def test_invalid_raw_json_fails(raw: bytes) -> None:
    with pytest.raises(EncodingError, match=r"MarshalJSON for type json\.RawMessage"):
        encode(RawJSON(raw))


_FINITE_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
              st.text(alphabet=st.sampled_from(' \t\n"\\<>&é\u2028x'))),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=15,
)


@given(_FINITE_JSON, st.sampled_from([None, 0, 2, "\t"]))
def test_raw_json_compaction_matches_reference(value: Any, indent: Any) -> None:
    pretty = json.dumps(value, indent=indent, ensure_ascii=False).encode()
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028")):
        compact = compact.replace(ch, esc)
    assert encode(RawJSON(pretty)) == compact.encode()


class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __go_json__(self) -> bytes:
        return b'{ "cents" : %d, "note": "<x>" }' % self.cents


def test_go_json_method_is_a_marshaler() -> None:
    assert encode({"m": Money(5)}) == b'{"m":{"cents":5,"note":"\\u003cx\\u003e"}}'


def test_go_json_method_must_return_valid_json_bytes() -> None:
    class Bad:
        def __go_json__(self) -> bytes:
            return b"{"

    class NotBytes:
        def __go_json__(self) -> str:
            return "{}"

    with pytest.raises(EncodingError, match="Bad"):
        encode(Bad())
    with pytest.raises(EncodingError, match="not bytes"):
        encode(NotBytes())


def test_unsupported_types_fail() -> None:
    with pytest.raises(EncodingError, match="unsupported type: set"):
        encode({1, 2})
    with pytest.raises(EncodingError, match="unsupported type: object"):
        encode([object()])


def test_cycles_fail_cleanly() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(EncodingError, match="nesting"):
        encode(loop)


# ---------------------------------------------------------------------------
# Times


def test_times_in_their_own_location() -> None:
    ny = ZoneInfo("America/New_York")
    assert encode(GoTime(1715694327_123456789)) == b'"2024-05-14T13:45:27.123456789Z"'
    assert encode(GoTime(1710053999_999999999, ny)) == b'"2024-03-10T01:59:59.999999999-05:00"'
    assert encode(datetime(2024, 5, 14, 13, 45, 27, 100000, tzinfo=UTC)) == b'"2024-05-14T13:45:27.1Z"'
    ist = timezone(timedelta(hours=5, minutes=30))
    assert encode(datetime(2024, 5, 14, 13, 45, 27, tzinfo=ist)) == b'"2024-05-14T13:45:27+05:30"'
    assert encode(datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=ny)) == b'"2024-11-03T01:30:00-05:00"'


def test_sub_minute_offsets_print_like_go() -> None:
    def at(offset: int) -> bytes:
        return encode(datetime(2024, 1, 1, tzinfo=timezone(timedelta(seconds=offset))))

    assert at(30) == b'"2024-01-01T00:00:00+00:00"'
    # Go truncates -30s/60 toward zero, so the sign is '+'.
    assert at(-30) == b'"2024-01-01T00:00:00+00:00"'
    assert at(-90) == b'"2024-01-01T00:00:00-00:01"'


def test_time_year_range() -> None:
    with pytest.raises(EncodingError, match=re.escape("year outside of range [0,9999]")):
        encode(GoTime(253402300800 * 10**9))
    with pytest.raises(EncodingError, match="year outside"):
        encode(GoTime(-62198755200 * 10**9))
    assert encode(GoTime(-62135596800 * 10**9)) == b'"0001-01-01T00:00:00Z"'


def test_naive_datetime_fails() -> None:
    with pytest.raises(EncodingError, match="naive"):
        encode(datetime(2024, 1, 1))


# ---------------------------------------------------------------------------
# Structs, enums, args


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Item:
    sku: str = arg_field(json="SKU")
    qty: int = 1
    color: Color = Color.RED


@dataclass
class Order:
    kind: ClassVar[str] = "order"
    customer_id: int = arg_field(json="customer_id")
    items: list[Item] = field(default_factory=list)
    by_name: dict[str, Item] = field(default_factory=dict)
    note: str = arg_field(omitempty=True, default="")
    flag: bool = arg_field(omitempty=True, default=False)
    count: int = arg_field(omitempty=True, default=0)
    ratio: float = arg_field(omitempty=True, default=0.0)
    tags: list[str] | None = arg_field(omitempty=True, default=None)
    blob: bytes = arg_field(omitempty=True, default=b"")
    secret: str = arg_field(skip=True, default="hidden")
    at: datetime | None = None
    level: Level = Level.LOW
    extra: dict[int, str] = field(default_factory=dict)


def test_dataclass_fields_in_order_with_go_tags() -> None:
    order = Order(customer_id=7, items=[Item("a<b", 2)], note="hi", secret="x")
    assert encode(order) == (
        b'{"customer_id":7,"items":[{"SKU":"a\\u003cb","qty":2,"color":"red"}],"by_name":{},'
        b'"note":"hi","at":null,"level":1,"extra":{}}'
    )


def test_omitempty_keeps_non_empty_values() -> None:
    order = Order(customer_id=0, flag=True, count=-1, ratio=0.5, tags=[], blob=b"\x00")
    doc = json.loads(encode(order))
    assert doc["flag"] is True and doc["count"] == -1 and doc["ratio"] == 0.5 and doc["blob"] == "AA=="
    assert "tags" not in doc  # an empty slice is empty for omitempty
    assert doc["customer_id"] == 0  # no omitempty on this one


def test_encode_args_requires_an_object() -> None:
    assert encode_args({"a": 1}) == b'{"a":1}'
    assert encode_args(Money(1)) == b'{"cents":1,"note":"\\u003cx\\u003e"}'
    with pytest.raises(EncodingError, match="not a JSON object"):
        encode_args([1])
    with pytest.raises(EncodingError, match="not a JSON object"):
        encode_args(None)


def test_decode_args_round_trips_nested_dataclasses() -> None:
    order = Order(
        customer_id=7,
        items=[Item("a", 2, Color.BLUE), Item("b")],
        by_name={"x": Item("x", 3)},
        note="n",
        tags=["t"],
        blob=b"\x00\xff",
        at=datetime(2024, 5, 14, 13, 45, 27, 123456, tzinfo=UTC),
        level=Level.HIGH,
        extra={1: "one", -2: "minus two"},
    )
    back = decode_args(Order, encode_args(order))
    assert back == Order(**{**order.__dict__, "secret": "hidden"})
    assert encode_args(back) == encode_args(order)


@given(
    st.integers(-(2**63), 2**63 - 1),
    st.lists(st.builds(Item, st.text(), st.integers(0, 100), st.sampled_from(Color)), max_size=4),
    st.text(),
    st.booleans(),
)
def test_decode_args_round_trip_property(cid: int, items: list[Item], note: str, flag: bool) -> None:
    order = Order(customer_id=cid, items=items, note=note, flag=flag)
    assert decode_args(Order, encode_args(order)) == order


def test_decode_args_go_rules() -> None:
    data = (
        b'{"CUSTOMER_ID": 3, "unknown": [1], "note": null, "items": null,'
        b' "at": "2024-01-02T03:04:05.5+01:00"}'
    )
    order = decode_args(Order, data)
    assert order.customer_id == 3  # case-insensitive fallback, like Go
    assert order.note == ""  # null leaves the default
    assert order.items == []
    assert order.at == datetime(2024, 1, 2, 2, 4, 5, 500000, tzinfo=UTC)
    assert decode_args(Order, b"{}") == Order(customer_id=0)  # missing: zero value


def test_decode_args_gotime_keeps_nanoseconds() -> None:
    @dataclass
    class Stamp:
        at: GoTime
        f32: Float32 = Float32(0.0)  # noqa: RUF009

    stamp = Stamp(GoTime(1710053999_999999999, timezone(timedelta(hours=-5))), Float32(0.5))
    back = decode_args(Stamp, encode(stamp))
    assert back.at.unix_ns == stamp.at.unix_ns
    assert back.at.utc_offset_seconds() == -5 * 3600
    assert back.f32 == Float32(0.5)
    assert encode(back) == encode(stamp)


def test_decode_args_invalid_text_becomes_replacement_chars() -> None:
    @dataclass
    class Text:
        s: str

    assert decode_args(Text, b'{"s": "a\xffb"}').s == "a\ufffdb"
    assert decode_args(Text, b'{"s": "\\ud800x"}').s == "\ufffdx"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"customer_id": "7"}', r"Order\.customer_id: cannot decode JSON string"),
        (b'{"customer_id": 1.5}', "cannot decode JSON number"),
        (b'{"customer_id": true}', "cannot decode JSON bool"),
        (b'{"customer_id": 1, "items": {}}', r"Order\.items"),
        (b'{"customer_id": 1, "items": [{"qty": "x"}]}', r"Order\.items\[0\]\.qty"),
        (b'{"customer_id": 1, "blob": "!!"}', "not standard base64"),
        (b'{"customer_id": 1, "items": [{"color": "green"}]}', "not a valid Color"),
        (b'{"customer_id": 1, "extra": {"x": "y"}}', "not an integer"),
        (b'{"customer_id": 1, "at": "yesterday"}', "unparseable time"),
        (b"[1]", "cannot decode JSON array"),
        (b"{", "not valid JSON"),
    ],
)
def test_decode_args_mismatches_raise_validation_error(data: bytes, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        decode_args(Order, data)


def test_decode_args_hook_takes_over() -> None:
    class Custom:
        def __init__(self, raw: bytes) -> None:
            self.raw = raw

        @classmethod
        def __go_json_decode__(cls, data: bytes) -> Custom:
            return cls(data)

    assert decode_args(Custom, b'{"x":1}').raw == b'{"x":1}'


def test_decode_args_plain_dict_and_any() -> None:
    assert decode_args(dict, b'{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    assert decode_args(dict[str, int], b'{"a": 1}') == {"a": 1}
    raw = decode_args(RawJSON, b'{"b": 1, "a": "<"}')
    assert raw == RawJSON(b'{"a":"\\u003c","b":1}')


def test_bytes_hint_accepts_line_breaks_like_go() -> None:
    @dataclass
    class Blob:
        b: bytes

    encoded = base64.b64encode(b"x" * 60).decode()
    wrapped = encoded[:40] + "\\r\\n" + encoded[40:]
    assert decode_args(Blob, ('{"b": "' + wrapped + '"}').encode()).b == b"x" * 60


# ---------------------------------------------------------------------------
# The Go-generated fixture, through the conformance family


def test_every_fixture_case_passes() -> None:
    fixture = json.loads((DEFAULT_FIXTURES / family.FILENAME).read_bytes())
    failures = {c["id"]: p for c in fixture["cases"] if (p := family.check(c, fixture, {})) is not None}
    assert failures == {}
    assert len(fixture["cases"]) == 454


def test_family_error_kind() -> None:
    assert family.error_kind("json: unsupported value: NaN") == "json: unsupported value: NaN"
    assert family.error_kind(
        "json: error calling MarshalJSON for type json.RawMessage: invalid character 'b'"
    ) == "json: error calling MarshalJSON for type json.RawMessage:"
