"""Just enough of tidwall/gjson (v1.19.0) to read River's unique-key values.

River builds the ``&args=`` part of a unique key by reading values out of the
encoded args with gjson paths (and writing them with ``sjson``). Args member
names become *paths*, so a name containing ``.``, ``*``, ``?``, ``#``, ``@``,
``|``, ``!``, ``\\`` or brackets is interpreted as path syntax and the bytes
River hashes depend on gjson's exact parsing rules. This module re-implements
those rules over ``bytes`` (Go strings may hold invalid UTF-8) so keys match
byte for byte, including for odd member names.

Not a general JSON library: inputs are assumed to be (mostly) well-formed JSON
text, as gjson assumes. ``Result.index`` follows gjson: the offset of ``raw``
inside the document passed to ``get`` when ``raw`` is a slice of it, else 0;
sjson relies on it to decide whether a path already exists.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from river_protocol.errors import UniqueKeyError
from river_protocol.golang.match import match_limit
from river_protocol.golang.utf8 import decode_rune, encode_rune

NULL, FALSE, NUMBER, STRING, TRUE, JSON = range(6)

_Q, _BS, _LB, _RB, _LC, _RC = 0x22, 0x5C, 0x5B, 0x5D, 0x7B, 0x7D
_DOT, _PIPE, _HASH, _AT, _STAR, _QM, _BANG, _COLON = 0x2E, 0x7C, 0x23, 0x40, 0x2A, 0x3F, 0x21, 0x3A
_LP, _RP, _COMMA, _SP = 0x28, 0x29, 0x2C, 0x20
_NUM_START = frozenset(b"+-0123456789iIN")
_WS = frozenset(b" \t\n\r")
# gjson caps wildcard matching at this many comparisons per byte of the key.
_MATCH_LIMIT = 10000


def _b(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


# ---------------------------------------------------------------- results


@dataclass
class Result:
    """gjson.Result. ``root``/``origin`` emulate Go's pointer arithmetic for ``index``."""

    type: int = NULL
    raw: bytes = b""
    text: bytes = b""
    num: float = 0.0
    index: int = 0
    indexes: list[int] | None = None
    root: bytes | None = field(default=None, repr=False, compare=False)
    origin: int = field(default=0, repr=False, compare=False)

    def exists(self) -> bool:
        return self.type != NULL or len(self.raw) != 0

    def is_object(self) -> bool:
        return self.type == JSON and self.raw[:1] == b"{"

    def is_array(self) -> bool:
        return self.type == JSON and self.raw[:1] == b"["

    def string(self) -> bytes:
        """Go's ``Result.String()``."""
        if self.type == FALSE:
            return b"false"
        if self.type == TRUE:
            return b"true"
        if self.type == STRING:
            return self.text
        if self.type == JSON:
            return self.raw
        if self.type == NUMBER:
            if not self.raw:
                return _format_float(self.num)
            digits = self.raw[1:] if self.raw[:1] == b"-" else self.raw
            if all(0x30 <= ch <= 0x39 for ch in digits):
                return self.raw
            return _format_float(self.num)
        return b""

    def as_bool(self) -> bool:
        if self.type == TRUE:
            return True
        if self.type == STRING:
            return _parse_bool(self.text.lower()) is True
        if self.type == NUMBER:
            return self.num != 0
        return False

    def get(self, path: bytes | str) -> Result:
        root = self.root if self.root is not None else self.raw
        base = self.origin if self.root is not None else 0
        r = _get(self.raw, _b(path), root, base)
        if r.indexes is not None:
            r.indexes = [i + self.index for i in r.indexes]
        else:
            r.index += self.index
        return r

    def array(self) -> list[Result]:
        if self.type == NULL:
            return []
        if not self.is_array():
            return [self]
        return self._array_values()

    def for_each(self, fn: Callable[[Result, Result], bool]) -> None:
        if not self.exists():
            return
        if self.type != JSON:
            fn(Result(), self)
            return
        js = self.raw
        n = len(js)
        i = 0
        obj = False
        key = Result()
        while i < n:
            if js[i] == _LC:
                i += 1
                key.type = STRING
                obj = True
                break
            if js[i] == _LB:
                i += 1
                key.type = NUMBER
                key.num = -1
                break
            if js[i] > _SP:
                return
            i += 1
        idx = 0
        while i < n:
            if obj:
                if js[i] != _Q:
                    i += 1
                    continue
                s = i
                i, vs, ve, vesc, ok = _parse_string(js, i + 1)
                if not ok:
                    return
                text = js[vs + 1 : ve - 1]
                key = Result(STRING, js[vs:ve], _unescape(text) if vesc else text, index=s + self.index)
            else:
                key = Result(NUMBER, num=key.num + 1)
            while i < n and (js[i] <= _SP or js[i] in (_COMMA, _COLON)):
                i += 1
            s = i
            i, value, ok = _parse_any(js, i, True, self._child_root(), self._child_base())
            if not ok:
                return
            if self.indexes is not None:
                if idx < len(self.indexes):
                    value.index = self.indexes[idx]
            else:
                value.index = s + self.index
            if not fn(key, value):
                return
            idx += 1

    def _child_root(self) -> bytes:
        return self.root if self.root is not None else self.raw

    def _child_base(self) -> int:
        return self.origin if self.root is not None else 0

    def _array_values(self) -> list[Result]:
        js = self.raw
        n = len(js)
        i = 0
        while i < n:
            if js[i] == _LB:
                i += 1
                break
            if js[i] > _SP:
                return []
            i += 1
        out: list[Result] = []
        root, base = self._child_root(), self._child_base()
        while i < n:
            ch = js[i]
            if ch <= _SP:
                i += 1
                continue
            if ch in (_RB, _RC):
                break
            if (0x30 <= ch <= 0x39) or ch == 0x2D:
                raw, num = _tonum(js[i:])
                value = Result(NUMBER, raw, num=num)
            elif ch in (_LC, _LB):
                value = Result(JSON, _squash(js[i:]))
            elif ch == ord("n"):
                value = Result(NULL, _tolit(js[i:]))
            elif ch == ord("t"):
                value = Result(TRUE, _tolit(js[i:]))
            elif ch == ord("f"):
                value = Result(FALSE, _tolit(js[i:]))
            elif ch == _Q:
                raw, text = _tostr(js[i:])
                value = Result(STRING, raw, text)
            else:
                i += 1
                continue
            value.index = i + self.index
            value.root, value.origin = root, base + i
            out.append(value)
            i += len(value.raw)
        if self.indexes is not None:
            if len(self.indexes) != len(out):
                for v in out:
                    v.index = 0
            else:
                for v, ix in zip(out, self.indexes, strict=True):
                    v.index = ix
        return out


def _format_float(num: float) -> bytes:
    """Go's ``strconv.FormatFloat(num, 'f', -1, 64)``."""
    if math.isnan(num):
        return b"NaN"
    if math.isinf(num):
        return b"+Inf" if num > 0 else b"-Inf"
    text = format(Decimal(repr(num)), "f")
    return text.encode()


_GO_FLOAT = re.compile(rb"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.I)


def _parse_float(raw: bytes) -> float:
    """``strconv.ParseFloat`` ignoring the error, as gjson does (0 when invalid)."""
    if _GO_FLOAT.fullmatch(raw) is None:
        return 0.0
    return float(raw)


def _parse_bool(text: bytes) -> bool | None:
    if text in (b"1", b"t", b"true"):
        return True
    if text in (b"0", b"f", b"false"):
        return False
    return None


# ---------------------------------------------------------------- scanning helpers


def _escaped_quote(js: bytes, i: int, lo: int) -> bool:
    """Whether the quote at ``i`` is escaped, counting backslashes down to index ``lo``."""
    if js[i - 1] != _BS:
        return False
    n = 0
    j = i - 2
    while j >= lo and js[j] == _BS:
        n += 1
        j -= 1
    return n % 2 == 0


def _parse_string(js: bytes, i: int) -> tuple[int, int, int, bool, bool]:
    """Scan a string whose opening quote is at ``i - 1``: (next i, raw start, raw end, escaped, ok)."""
    s = i
    n = len(js)
    while i < n:
        ch = js[i]
        if ch == _Q:
            return i + 1, s - 1, i + 1, False, True
        if ch == _BS:
            i += 1
            while i < n:
                if js[i] == _Q and not _escaped_quote(js, i, 1):
                    return i + 1, s - 1, i + 1, True, True
                i += 1
            break
        i += 1
    return i, s - 1, n, False, False


def _parse_number(js: bytes, i: int) -> tuple[int, int]:
    s = i
    i += 1
    n = len(js)
    while i < n:
        if js[i] <= _SP or js[i] in (_COMMA, _RB, _RC):
            return i, s
        i += 1
    return i, s


def _parse_literal(js: bytes, i: int) -> tuple[int, int]:
    s = i
    i += 1
    n = len(js)
    while i < n:
        if not 0x61 <= js[i] <= 0x7A:
            return i, s
        i += 1
    return i, s


def _parse_squash(js: bytes, i: int) -> tuple[int, int]:
    """Skip the container opening at ``i``: (index after it, start)."""
    s = i
    i += 1
    depth = 1
    n = len(js)
    while i < n:
        ch = js[i]
        if ch == _Q:
            i += 1
            s2 = i
            while i < n:
                if js[i] == _Q and not _escaped_quote(js, i, s2):
                    break
                i += 1
        elif ch in (_LC, _LP, _LB):
            depth += 1
        elif ch in (_RC, _RP, _RB):
            depth -= 1
            if depth == 0:
                return i + 1, s
        i += 1
    return i, s


def _squash(js: bytes) -> bytes:
    i, depth = (0, 0) if js[:1] == b'"' else (1, 1)
    n = len(js)
    while i < n:
        ch = js[i]
        if ch == _Q:
            i += 1
            s2 = i
            while i < n:
                if js[i] == _Q and not _escaped_quote(js, i, s2):
                    break
                i += 1
            if depth == 0:
                return js if i >= n else js[: i + 1]
        elif ch in (_LC, _LB, _LP):
            depth += 1
        elif ch in (_RC, _RB, _RP):
            depth -= 1
            if depth == 0:
                return js[: i + 1]
        i += 1
    return js


def _tonum(js: bytes) -> tuple[bytes, float]:
    for i in range(1, len(js)):
        ch = js[i]
        if ch <= 0x2D:
            if ch <= _SP or ch == _COMMA:
                return js[:i], _parse_float(js[:i])
        elif ch in (_RB, _RC):
            return js[:i], _parse_float(js[:i])
    return js, _parse_float(js)


def _tolit(js: bytes) -> bytes:
    for i in range(1, len(js)):
        if not 0x61 <= js[i] <= 0x7A:
            return js[:i]
    return js


def _tostr(js: bytes) -> tuple[bytes, bytes]:
    n = len(js)
    i = 1
    while i < n:
        ch = js[i]
        if ch == _Q:
            return js[: i + 1], js[1:i]
        if ch == _BS:
            i += 1
            while i < n:
                if js[i] == _Q and not _escaped_quote(js, i, 1):
                    return js[: i + 1], _unescape(js[1:i])
                i += 1
            ret = js[: i + 1] if i + 1 < n else js[:i]
            return ret, _unescape(js[1:i])
        i += 1
    return js, js[1:]


def _trim(s: bytes) -> bytes:
    a, b = 0, len(s)
    while a < b and s[a] <= _SP:
        a += 1
    while b > a and s[b - 1] <= _SP:
        b -= 1
    return s[a:b]


_SIMPLE_ESCAPES = {
    _BS: b"\\", 0x2F: b"/", 0x62: b"\b", 0x66: b"\f", 0x6E: b"\n", 0x72: b"\r", 0x74: b"\t", _Q: b'"'
}


def _unescape(js: bytes) -> bytes:
    out = bytearray()
    n = len(js)
    i = 0
    while i < n:
        ch = js[i]
        if ch < _SP:
            return bytes(out)
        if ch != _BS:
            out.append(ch)
            i += 1
            continue
        i += 1
        if i >= n:
            return bytes(out)
        e = js[i]
        if e in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[e]
            i += 1
            continue
        if e != 0x75:
            return bytes(out)
        if i + 5 > n:
            return bytes(out)
        r = _hex4(js[i + 1 : i + 5])
        i += 5
        if 0xD800 <= r < 0xE000 and n - i >= 6 and js[i] == _BS and js[i + 1] == 0x75:
            r2 = _hex4(js[i + 2 : i + 6])
            if 0xD800 <= r < 0xDC00 and 0xDC00 <= r2 < 0xE000:
                r = 0x10000 + ((r - 0xD800) << 10) + (r2 - 0xDC00)
            else:
                r = 0xFFFD
            i += 6
        out += encode_rune(r)
    return bytes(out)


def _hex4(text: bytes) -> int:
    try:
        return int(text, 16) if len(text) == 4 and re.fullmatch(rb"[0-9a-fA-F]{4}", text) else 0
    except ValueError:
        return 0


def _append_json_string(s: bytes) -> bytes:
    """gjson's ``AppendJSONString`` (differs from Go's encoder in a few escapes)."""
    out = bytearray(b'"')
    hexd = b"0123456789abcdef"
    i = 0
    n = len(s)
    while i < n:
        ch = s[i]
        if ch < _SP:
            short = {0x08: b"b", 0x0C: b"f", 0x0A: b"n", 0x0D: b"r", 0x09: b"t"}
            out += b"\\" + (short.get(ch) or b"u00" + bytes((hexd[ch >> 4], hexd[ch & 0xF])))
        elif ch in (0x3E, 0x3C, 0x26):
            out += b"\\u00" + bytes((hexd[ch >> 4], hexd[ch & 0xF]))
        elif ch == _BS:
            out += b"\\\\"
        elif ch == _Q:
            out += b'\\"'
        elif ch > 127:
            r, size = decode_rune(s, i)
            if r == 0xFFFD and size == 1:
                out += b"\\ufffd"
            elif r in (0x2028, 0x2029):
                out += b"\\u202" + bytes((hexd[r & 0xF],))
            else:
                out += s[i : i + size]
            i += size
            continue
        else:
            out.append(ch)
        i += 1
    out.append(_Q)
    return bytes(out)


# ---------------------------------------------------------------- validity


_VALID_SCALAR = re.compile(rb"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")
_VALID_STRING_TAIL = re.compile(rb'(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')


def valid(data: bytes) -> bool:
    """gjson ``Valid``: strict JSON syntax (UTF-8 not checked)."""
    try:
        i = _valid_any(data, 0)
    except IndexError:
        return False
    if i < 0:
        return False
    while i < len(data):
        if data[i] not in _WS:
            return False
        i += 1
    return True


def _skip_ws(data: bytes, i: int) -> int:
    while i < len(data) and data[i] in _WS:
        i += 1
    return i


def _valid_any(data: bytes, i: int) -> int:
    i = _skip_ws(data, i)
    if i >= len(data):
        return -1
    ch = data[i]
    if ch == _LC:
        i = _skip_ws(data, i + 1)
        if data[i] == _RC:
            return i + 1
        while True:
            if data[i] != _Q:
                return -1
            i = _valid_string(data, i + 1)
            if i < 0:
                return -1
            i = _skip_ws(data, i)
            if data[i] != _COLON:
                return -1
            i = _valid_any(data, i + 1)
            if i < 0:
                return -1
            i = _skip_ws(data, i)
            if data[i] == _RC:
                return i + 1
            if data[i] != _COMMA:
                return -1
            i = _skip_ws(data, i + 1)
    if ch == _LB:
        i = _skip_ws(data, i + 1)
        if data[i] == _RB:
            return i + 1
        while True:
            i = _valid_any(data, i)
            if i < 0:
                return -1
            i = _skip_ws(data, i)
            if data[i] == _RB:
                return i + 1
            if data[i] != _COMMA:
                return -1
            i += 1
    if ch == _Q:
        return _valid_string(data, i + 1)
    m = _VALID_SCALAR.match(data, i)
    return m.end() if m else -1


def _valid_string(data: bytes, i: int) -> int:
    m = _VALID_STRING_TAIL.match(data, i)
    return m.end() if m else -1


# ---------------------------------------------------------------- path parsing


@dataclass
class _ObjPath:
    part: bytes = b""
    path: bytes = b""
    pipe: bytes = b""
    piped: bool = False
    wild: bool = False
    more: bool = False


def _is_dot_piper(s: bytes) -> bool:
    c = s[0]
    if c == _AT:
        i = 1
        while i < len(s) and s[i] not in (_DOT, _PIPE, _COLON):
            i += 1
        return s[1:i] in _MODIFIERS
    return c in (_LB, _LC)


def _parse_object_path(path: bytes) -> _ObjPath:
    r = _ObjPath()
    n = len(path)
    i = 0
    while i < n:
        ch = path[i]
        if ch == _PIPE:
            r.part, r.pipe, r.piped = path[:i], path[i + 1 :], True
            return r
        if ch == _DOT:
            r.part = path[:i]
            if i < n - 1 and _is_dot_piper(path[i + 1 :]):
                r.pipe, r.piped = path[i + 1 :], True
            else:
                r.path, r.more = path[i + 1 :], True
            return r
        if ch in (_STAR, _QM):
            r.wild = True
            i += 1
            continue
        if ch == _BS:
            epart = bytearray(path[:i])
            i += 1
            if i < n:
                epart.append(path[i])
                i += 1
                while i < n:
                    ch = path[i]
                    if ch == _BS:
                        i += 1
                        if i < n:
                            epart.append(path[i])
                        i += 1
                        continue
                    if ch == _DOT:
                        r.part = bytes(epart)
                        if i < n - 1 and _is_dot_piper(path[i + 1 :]):
                            r.pipe, r.piped = path[i + 1 :], True
                        else:
                            r.path, r.more = path[i + 1 :], True
                        return r
                    if ch == _PIPE:
                        r.part, r.pipe, r.piped = bytes(epart), path[i + 1 :], True
                        return r
                    if ch in (_STAR, _QM):
                        r.wild = True
                    epart.append(ch)
                    i += 1
            r.part = bytes(epart)
            return r
        i += 1
    r.part = path
    return r


@dataclass
class _Query:
    on: bool = False
    all: bool = False
    path: bytes = b""
    op: bytes = b""
    value: bytes = b""


@dataclass
class _ArrPath:
    part: bytes = b""
    path: bytes = b""
    pipe: bytes = b""
    piped: bool = False
    more: bool = False
    alogok: bool = False
    arrch: bool = False
    alogkey: bytes = b""
    query: _Query = field(default_factory=_Query)


def _parse_array_path(path: bytes) -> _ArrPath:
    r = _ArrPath()
    n = len(path)
    i = 0
    while i < n:
        ch = path[i]
        if ch == _PIPE:
            r.part, r.pipe, r.piped = path[:i], path[i + 1 :], True
            return r
        if ch == _DOT:
            r.part = path[:i]
            if not r.arrch and i < n - 1 and _is_dot_piper(path[i + 1 :]):
                r.pipe, r.piped = path[i + 1 :], True
            else:
                r.path, r.more = path[i + 1 :], True
            return r
        if ch == _HASH:
            r.arrch = True
            if i == 0 and n > 1:
                if path[1] == _DOT:
                    r.alogok, r.alogkey, r.path = True, path[2:], path[:1]
                elif path[1] in (_LB, _LP):
                    r.query.on = True
                    q = _parse_query(path[i:])
                    if q is None:
                        break
                    qpath, op, value, _remain, fi, vesc = q
                    if len(value) >= 2 and value[0] == _Q and value[-1] == _Q:
                        value = value[1:-1]
                        if vesc:
                            value = _unescape(value)
                    r.query.path, r.query.op, r.query.value = qpath, op, value
                    i = fi - 1
                    if i + 1 < n and path[i + 1] == _HASH:
                        r.query.all = True
        i += 1
    r.part = path
    r.path = b""
    return r


def _parse_query(query: bytes) -> tuple[bytes, bytes, bytes, bytes, int, bool] | None:
    if len(query) < 2 or query[0] != _HASH or query[1] not in (_LP, _LB):
        return None
    n = len(query)
    i = 2
    j = 0
    depth = 1
    vesc = False
    while i < n:
        ch = query[i]
        if depth == 1 and j == 0 and ch in b"!=<>%":
            j = i
            i += 1
            continue
        if ch == _BS:
            i += 1
        elif ch in (_LB, _LP):
            depth += 1
        elif ch in (_RB, _RP):
            depth -= 1
            if depth == 0:
                break
        elif ch == _Q:
            i += 1
            while i < n:
                if query[i] == _BS:
                    vesc = True
                    i += 1
                elif query[i] == _Q:
                    break
                i += 1
        i += 1
    if depth > 0:
        return None
    if j > 0:
        path = _trim(query[2:j])
        value = _trim(query[j:i])
        remain = query[i + 1 :]
        opsz = 0
        two = value[:2]
        if len(value) == 1:
            opsz = 1
        elif two in (b"!=", b"!%", b"<=", b">="):
            opsz = 2
        elif two == b"==":
            value = value[1:]
            opsz = 1
        elif value[0] in b"<>=%":
            opsz = 1
        op = value[:opsz]
        value = _trim(value[opsz:])
    else:
        path = _trim(query[2:i])
        remain = query[i + 1 :]
        op = value = b""
    return path, op, value, remain, i + 1, vesc


def _split_possible_pipe(path: bytes) -> tuple[bytes, bytes] | None:
    if _PIPE not in path:
        return None
    n = len(path)
    if path[:1] == b"{":
        squashed = _squash(path[1:])
        if len(squashed) < n - 1:
            squashed = path[: len(squashed) + 1]
            remain = path[len(squashed) :]
            if remain[0] == _PIPE:
                return squashed, remain[1:]
        return None
    i = 0
    while i < n:
        ch = path[i]
        if ch == _BS:
            i += 1
        elif ch == _DOT:
            if i == n - 1:
                return None
            if path[i + 1] == _HASH:
                i += 2
                if i == n:
                    return None
                if path[i] in (_LB, _LP):
                    start, end = (_LB, _RB) if path[i] == _LB else (_LP, _RP)
                    i += 1
                    depth = 1
                    while i < n:
                        c = path[i]
                        if c == _BS:
                            i += 1
                        elif c == start:
                            depth += 1
                        elif c == end:
                            depth -= 1
                            if depth == 0:
                                break
                        elif c == _Q:
                            i += 1
                            while i < n:
                                if path[i] == _BS:
                                    i += 1
                                elif path[i] == _Q:
                                    break
                                i += 1
                        i += 1
        elif ch == _PIPE:
            return path[:i], path[i + 1 :]
        i += 1
    return None


def _parse_sub_selectors(path: bytes) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
    sels: list[tuple[bytes, bytes]] = []
    modifier = 0
    depth = 1
    colon = 0
    start = 1
    n = len(path)
    i = 1

    def push() -> None:
        nonlocal colon, modifier, start
        if colon == 0:
            sels.append((b"", path[start:i]))
        else:
            sels.append((path[start:colon], path[colon + 1 : i]))
        colon = 0
        modifier = 0
        start = i + 1

    while i < n:
        ch = path[i]
        if ch == _BS:
            i += 1
        elif ch == _AT:
            if modifier == 0 and i > 0 and path[i - 1] in (_DOT, _PIPE):
                modifier = i
        elif ch == _COLON:
            if modifier == 0 and colon == 0 and depth == 1:
                colon = i
        elif ch == _COMMA:
            if depth == 1:
                push()
        elif ch == _Q:
            i += 1
            while i < n:
                if path[i] == _BS:
                    i += 1
                elif path[i] == _Q:
                    break
                i += 1
        elif ch in (_LB, _LP, _LC):
            depth += 1
        elif ch in (_RB, _RP, _RC):
            depth -= 1
            if depth == 0:
                push()
                return sels, path[i + 1 :]
        i += 1
    return None


def _name_of_last(path: bytes) -> bytes:
    for i in range(len(path) - 1, -1, -1):
        if path[i] in (_PIPE, _DOT):
            if i > 0 and path[i - 1] == _BS:
                continue
            return path[i + 1 :]
    return path


def _is_simple_name(component: bytes) -> bool:
    return not any(ch < _SP or ch in b"[]{}()#|!" for ch in component)


# ---------------------------------------------------------------- parsing values


class _Ctx:
    __slots__ = ("base", "calcd", "json", "pipe", "piped", "root", "value")

    def __init__(self, js: bytes, root: bytes, base: int) -> None:
        self.json = js
        self.root = root
        self.base = base
        self.value = Result()
        self.pipe = b""
        self.piped = False
        self.calcd = False

    def sliced(self, typ: int, start: int, end: int) -> Result:
        raw = self.json[start:end]
        return Result(typ, raw, root=self.root, origin=self.base + start)


def _string_result(c: _Ctx, start: int, end: int, vesc: bool) -> Result:
    r = c.sliced(STRING, start, end)
    inner = r.raw[1:-1]
    r.text = _unescape(inner) if vesc else inner
    return r


def _literal_result(c: _Ctx, vc: int, start: int, end: int) -> Result:
    return c.sliced(TRUE if vc == ord("t") else FALSE if vc == ord("f") else NULL, start, end)


def _number_result(c: _Ctx, start: int, end: int) -> Result:
    r = c.sliced(NUMBER, start, end)
    r.num = _parse_float(r.raw)
    return r


def _parse_any(js: bytes, i: int, hit: bool, root: bytes, base: int) -> tuple[int, Result, bool]:
    c = _Ctx(js, root, base)
    n = len(js)
    while i < n:
        ch = js[i]
        if ch in (_LC, _LB):
            i, s = _parse_squash(js, i)
            res = c.sliced(JSON, s, i) if hit else Result()
            if res.raw:
                res.index = s
            return i, res, True
        if ch <= _SP:
            i += 1
            continue
        num = False
        if ch == _Q:
            i, vs, ve, vesc, ok = _parse_string(js, i + 1)
            if not ok:
                return i, Result(), False
            return i, (_string_result(c, vs, ve, vesc) if hit else Result()), True
        if ch == ord("n") and i + 1 < n and js[i + 1] != ord("u"):
            num = True
        elif ch in b"tfn":
            i, s = _parse_literal(js, i)
            if hit:
                return i, _literal_result(c, ch, s, i), True
        elif ch in _NUM_START:
            num = True
        if num:
            i, s = _parse_number(js, i)
            return i, (_number_result(c, s, i) if hit else Result()), True
        i += 1
    return i, Result(), False


def _parse_object(c: _Ctx, i: int, path: bytes) -> tuple[int, bool]:
    js = c.json
    n = len(js)
    rp = _parse_object_path(path)
    if not rp.more and rp.piped:
        c.pipe, c.piped = rp.pipe, True
    ok = False
    key = b""
    kesc = False
    while i < n:
        while i < n:
            if js[i] == _Q:
                i += 1
                s = i
                done = False
                while i < n:
                    ch = js[i]
                    if ch == _Q:
                        key, kesc, ok = js[s:i], False, True
                        i += 1
                        done = True
                        break
                    if ch == _BS:
                        i += 1
                        while i < n:
                            if js[i] == _Q and not _escaped_quote(js, i, 1):
                                key, kesc, ok = js[s:i], True, True
                                i += 1
                                done = True
                                break
                            i += 1
                        break
                    i += 1
                if not done:
                    key, kesc, ok = js[s:], False, False
                break
            if js[i] == _RC:
                return i + 1, False
            i += 1
        if not ok:
            return i, False
        k = _unescape(key) if kesc else key
        pmatch = match_limit(k, rp.part, _MATCH_LIMIT) if rp.wild else rp.part == k
        hit = pmatch and not rp.more
        while i < n:
            ch = js[i]
            num = False
            if ch == _Q:
                i, vs, ve, vesc, ok = _parse_string(js, i + 1)
                if not ok:
                    return i, False
                if hit:
                    c.value = _string_result(c, vs, ve, vesc)
                    return i, True
            elif ch in (_LC, _LB):
                if pmatch and not hit:
                    sub = _parse_object if ch == _LC else _parse_array
                    i, hit = sub(c, i + 1, rp.path)
                    if hit:
                        return i, True
                else:
                    i, s = _parse_squash(js, i)
                    if hit:
                        c.value = c.sliced(JSON, s, i)
                        return i, True
            elif ch == ord("n") and i + 1 < n and js[i + 1] != ord("u"):
                num = True
            elif ch in b"tfn":
                i, s = _parse_literal(js, i)
                if hit:
                    c.value = _literal_result(c, ch, s, i)
                    return i, True
            elif ch in _NUM_START:
                num = True
            else:
                i += 1
                continue
            if num:
                i, s = _parse_number(js, i)
                if hit:
                    c.value = _number_result(c, s, i)
                    return i, True
            break
    return i, False


def _query_matches(rp: _ArrPath, value: Result) -> bool:
    rpv = rp.query.value
    if rpv[:1] == b"~":
        rpv = rpv[1:]
        ish: bool | None = None
        if rpv == b"*":
            ish = value.exists()
        elif rpv == b"null":
            ish = value.type == NULL
        elif rpv == b"true":
            ish = value.type == TRUE or (
                value.type == STRING and _parse_bool(value.text.lower()) is True
            ) or (value.type == NUMBER and value.num != 0)
        elif rpv == b"false":
            ish = value.type in (NULL, FALSE) or (
                value.type == STRING and _parse_bool(value.text.lower()) is False
            ) or (value.type == NUMBER and value.num == 0)
        if ish is not None:
            rpv = b"true"
            value = Result(TRUE if ish else FALSE)
        else:
            rpv = b""
            value = Result()
    if not value.exists():
        return False
    op = rp.query.op
    if not op:
        return True
    if value.type == STRING:
        sv = value.text
        return {
            b"=": lambda: sv == rpv,
            b"!=": lambda: sv != rpv,
            b"<": lambda: sv < rpv,
            b"<=": lambda: sv <= rpv,
            b">": lambda: sv > rpv,
            b">=": lambda: sv >= rpv,
            b"%": lambda: match_limit(sv, rpv, _MATCH_LIMIT),
            b"!%": lambda: not match_limit(sv, rpv, _MATCH_LIMIT),
        }.get(op, lambda: False)()
    if value.type == NUMBER:
        nv, rn = value.num, _parse_float(rpv)
        return {
            b"=": nv == rn, b"!=": nv != rn, b"<": nv < rn,
            b"<=": nv <= rn, b">": nv > rn, b">=": nv >= rn,
        }.get(op, False)
    if value.type == TRUE:
        return {b"=": rpv == b"true", b"!=": rpv != b"true", b">": rpv == b"false", b">=": True}.get(
            op, False
        )
    if value.type == FALSE:
        return {b"=": rpv == b"false", b"!=": rpv != b"false", b"<": rpv == b"true", b"<=": True}.get(
            op, False
        )
    return False


def _parse_array(c: _Ctx, i: int, path: bytes) -> tuple[int, bool]:
    js = c.json
    n = len(js)
    rp = _parse_array_path(path)
    partidx = -1
    if not rp.arrch and rp.part and all(0x30 <= ch <= 0x39 for ch in rp.part):
        partidx = int(rp.part)
    if not rp.more and rp.piped:
        c.pipe, c.piped = rp.pipe, True
    pmatch = hit = False
    h = 0
    alog: list[int] = []
    multires = bytearray()
    query_indexes: list[int] = []

    def proc_query(qval: Result) -> bool:
        if rp.query.all and not multires:
            multires.append(_LB)
        parent_index = qval.origin - c.base if qval.raw else 0
        qval.index = 0
        if qval.type == JSON:
            res = qval.get(rp.query.path)
        else:
            if rp.query.path:
                return False
            res = qval
        if _query_matches(rp, res):
            if rp.more:
                split = _split_possible_pipe(rp.path)
                if split is not None:
                    rp.path, c.pipe, c.piped = split[0], split[1], True
                res = qval.get(rp.path)
            else:
                res = qval
            if rp.query.all:
                raw = res.raw or res.string()
                if raw:
                    if len(multires) > 1:
                        multires.append(_COMMA)
                    multires.extend(raw)
                    query_indexes.append(res.index + parent_index)
            else:
                c.value = res
                return True
        return False

    while i < n + 1:
        if not rp.arrch:
            pmatch = partidx == h
            hit = pmatch and not rp.more
        h += 1
        if rp.alogok:
            alog.append(i)
        while True:
            if i > n:
                break
            ch = _RB if i == n else js[i]
            num = False
            if ch == _Q:
                i, vs, ve, vesc, ok = _parse_string(js, i + 1)
                if not ok:
                    return i, False
                if rp.query.on:
                    if proc_query(_string_result(c, vs, ve, vesc)):
                        return i, True
                elif hit:
                    if rp.alogok:
                        break
                    c.value = _string_result(c, vs, ve, vesc)
                    return i, True
            elif ch in (_LC, _LB):
                if pmatch and not hit:
                    sub = _parse_object if ch == _LC else _parse_array
                    i, hit = sub(c, i + 1, rp.path)
                    if hit:
                        if rp.alogok:
                            break
                        return i, True
                else:
                    i, s = _parse_squash(js, i)
                    if rp.query.on:
                        if proc_query(c.sliced(JSON, s, i)):
                            return i, True
                    elif hit:
                        if rp.alogok:
                            break
                        c.value = c.sliced(JSON, s, i)
                        return i, True
            elif ch == ord("n") and i + 1 < n and js[i + 1] != ord("u"):
                num = True
            elif ch in b"tfn":
                i, s = _parse_literal(js, i)
                if rp.query.on:
                    if proc_query(_literal_result(c, ch, s, i)):
                        return i, True
                elif hit:
                    if rp.alogok:
                        break
                    c.value = _literal_result(c, ch, s, i)
                    return i, True
            elif ch in _NUM_START:
                num = True
            elif ch == _RB:
                if rp.arrch and rp.part == b"#":
                    if rp.alogok:
                        split = _split_possible_pipe(rp.alogkey)
                        if split is not None:
                            rp.alogkey, c.pipe, c.piped = split[0], split[1], True
                        indexes: list[int] = []
                        out = bytearray(b"[")
                        k = 0
                        for idx in alog:
                            while idx < n and js[idx] in _WS:
                                idx += 1
                            if idx < n and js[idx] != _RB:
                                _, item, ok = _parse_any(js, idx, True, c.root, c.base)
                                if ok:
                                    if item.raw and item.type == JSON:
                                        item.index = item.origin - c.base
                                    sub_res = item.get(rp.alogkey)
                                    if sub_res.exists():
                                        if k > 0:
                                            out.append(_COMMA)
                                        out += sub_res.raw or sub_res.string()
                                        indexes.append(sub_res.index)
                                        k += 1
                        out.append(_RB)
                        c.value = Result(JSON, bytes(out), indexes=indexes)
                        return i + 1, True
                    c.value = Result(NUMBER, str(h - 1).encode(), num=float(h - 1))
                    c.calcd = True
                    return i + 1, True
                if not c.value.exists():
                    if multires:
                        c.value = Result(JSON, bytes(multires) + b"]", indexes=query_indexes)
                    elif rp.query.all:
                        c.value = Result(JSON, b"[]")
                return i + 1, False
            else:
                i += 1
                continue
            if num:
                i, s = _parse_number(js, i)
                if rp.query.on:
                    if proc_query(_number_result(c, s, i)):
                        return i, True
                elif hit:
                    if rp.alogok:
                        break
                    c.value = _number_result(c, s, i)
                    return i, True
            break
    return i, False


# ---------------------------------------------------------------- modifiers and statics


def parse(js: bytes) -> Result:
    """gjson ``Parse``."""
    return _parse_at(js, js, 0)


def _parse_at(js: bytes, root: bytes, base: int) -> Result:
    n = len(js)
    i = 0
    value = Result()
    while i < n:
        ch = js[i]
        if ch in (_LC, _LB):
            value = Result(JSON, js[i:], root=root, origin=base + i)
            break
        if ch <= _SP:
            i += 1
            continue
        if ch in b"+-0123456789iIN" or (ch == ord("n") and i + 1 < n and js[i + 1] != ord("u")):
            raw, num = _tonum(js[i:])
            value = Result(NUMBER, raw, num=num)
        elif ch == ord("n"):
            value = Result(NULL, _tolit(js[i:]))
        elif ch == ord("t"):
            value = Result(TRUE, _tolit(js[i:]))
        elif ch == ord("f"):
            value = Result(FALSE, _tolit(js[i:]))
        elif ch == _Q:
            raw, text = _tostr(js[i:])
            value = Result(STRING, raw, text)
        else:
            return Result()
        value.root, value.origin = root, base + i
        break
    if value.exists():
        value.index = i
    return value


def _unwrap(js: bytes) -> bytes:
    js = _trim(js)
    if len(js) >= 2 and js[0] in (_LB, _LC):
        js = js[1:-1]
    return js


def _collect(res: Result) -> list[tuple[Result, Result]]:
    items: list[tuple[Result, Result]] = []

    def keep(key: Result, value: Result) -> bool:
        items.append((key, value))
        return True

    res.for_each(keep)
    return items


def _mod_this(js: bytes, arg: bytes) -> bytes:
    return js


def _mod_ugly(js: bytes, arg: bytes) -> bytes:
    out = bytearray()
    i = 0
    n = len(js)
    while i < n:
        ch = js[i]
        if ch > _SP:
            out.append(ch)
            if ch == _Q:
                i += 1
                while i < n:
                    out.append(js[i])
                    if js[i] == _Q and not _escaped_quote(js, i, 0):
                        break
                    i += 1
        i += 1
    return bytes(out)


def _mod_pretty(js: bytes, arg: bytes) -> bytes:
    raise UniqueKeyError("the gjson @pretty modifier is not supported in unique-key paths")


def _mod_reverse(js: bytes, arg: bytes) -> bytes:
    res = parse(js)
    if res.is_array():
        vals = [v.raw for _, v in _collect(res)]
        return b"[" + b",".join(reversed(vals)) + b"]"
    if res.is_object():
        pairs = [k.raw + b":" + v.raw for k, v in _collect(res)]
        return b"{" + b",".join(reversed(pairs)) + b"}"
    return js


def _mod_flatten(js: bytes, arg: bytes) -> bytes:
    res = parse(js)
    if not res.is_array():
        return js
    deep = False
    if arg:
        for k, v in _collect(parse(arg)):
            if k.string() == b"deep":
                deep = v.as_bool()
    parts: list[bytes] = []
    for _, v in _collect(res):
        raw = (_unwrap(_mod_flatten(v.raw, arg)) if deep else _unwrap(v.raw)) if v.is_array() else v.raw
        raw = raw.strip(b" \t\n\r\v\f")
        if raw:
            parts.append(raw)
    return b"[" + b",".join(parts) + b"]"


def _mod_keys(js: bytes, arg: bytes) -> bytes:
    v = parse(js)
    if not v.exists():
        return b"[]"
    obj = v.is_object()
    return b"[" + b",".join(k.raw if obj else b"null" for k, _ in _collect(v)) + b"]"


def _mod_values(js: bytes, arg: bytes) -> bytes:
    v = parse(js)
    if not v.exists():
        return b"[]"
    if v.is_array():
        return js
    return b"[" + b",".join(val.raw for _, val in _collect(v)) + b"]"


def _mod_join(js: bytes, arg: bytes) -> bytes:
    res = parse(js)
    if not res.is_array():
        return js
    preserve = False
    if arg:
        for k, v in _collect(parse(arg)):
            if k.string() == b"preserve":
                preserve = v.as_bool()
    if preserve:
        parts = [_unwrap(v.raw) for _, v in _collect(res) if v.is_object()]
        return b"{" + b",".join(parts) + b"}"
    keys: list[Result] = []
    kvals: dict[bytes, Result] = {}
    for _, obj in _collect(res):
        if not obj.is_object():
            continue
        for k, val in _collect(obj):
            ks = k.string()
            if ks not in kvals:
                keys.append(k)
            kvals[ks] = val
    return b"{" + b",".join(k.raw + b":" + kvals[k.string()].raw for k in keys) + b"}"


def _mod_valid(js: bytes, arg: bytes) -> bytes:
    return js if valid(js) else b""


def _mod_fromstr(js: bytes, arg: bytes) -> bytes:
    return parse(js).string() if valid(js) else b""


def _mod_tostr(js: bytes, arg: bytes) -> bytes:
    return _append_json_string(js)


def _mod_group(js: bytes, arg: bytes) -> bytes:
    res = parse(js)
    if not res.is_object():
        return b""
    rows: list[bytearray] = []
    for k, v in _collect(res):
        if not v.is_array():
            continue
        for idx, (_, item) in enumerate(_collect(v)):
            if idx == len(rows):
                rows.append(bytearray())
            rows[idx] += b"," + k.raw + b":" + item.raw
    return b"[" + b",".join(b"{" + bytes(r[1:]) + b"}" for r in rows) + b"]"


def _mod_dig(js: bytes, arg: bytes) -> bytes:
    found: list[Result] = []

    def descend(parent: Result) -> None:
        res = parent.get(arg)
        if res.exists():
            found.append(res)
        if parent.is_array() or parent.is_object():
            for _, v in _collect(parent):
                descend(v)

    descend(parse(js))
    return b"[" + b",".join(r.raw for r in found) + b"]"


_MODIFIERS: dict[bytes, Callable[[bytes, bytes], bytes]] = {
    b"pretty": _mod_pretty,
    b"ugly": _mod_ugly,
    b"reverse": _mod_reverse,
    b"this": _mod_this,
    b"flatten": _mod_flatten,
    b"join": _mod_join,
    b"valid": _mod_valid,
    b"keys": _mod_keys,
    b"values": _mod_values,
    b"tostr": _mod_tostr,
    b"fromstr": _mod_fromstr,
    b"group": _mod_group,
    b"dig": _mod_dig,
}


def _exec_static(path: bytes) -> tuple[bytes, bytes] | None:
    name = path[1:]
    if name and name[0] in b'{["+-0123456789':
        end, _start = _parse_squash(name, 0)
        res = name[:end]
        return name[len(res) :], res
    path_out = b""
    for i in range(1, len(path)):
        if path[i] in (_PIPE, _DOT):
            path_out, name = path[i:], path[1:i]
            break
    if name.lower() in (b"true", b"false", b"null", b"nan", b"inf"):
        return path_out, name
    return None


def _exec_modifier(js: bytes, path: bytes) -> tuple[bytes, bytes] | None:
    name = path[1:]
    path_out = b""
    has_args = False
    for i in range(1, len(path)):
        ch = path[i]
        if ch == _COLON:
            path_out, name = path[i + 1 :], path[1:i]
            has_args = len(path_out) > 0
            break
        if ch in (_PIPE, _DOT):
            path_out, name = path[i:], path[1:i]
            break
    fn = _MODIFIERS.get(name)
    if fn is None:
        return None
    args = b""
    if has_args:
        parsed = False
        if path_out[0] in b'{["' and parse(path_out).exists():
            args = _squash(path_out)
            path_out = path_out[len(args) :]
            parsed = True
        if not parsed:
            i = 0
            while i < len(path_out):
                if path_out[i] == _PIPE:
                    break
                if path_out[i] in b'{["(':
                    i += len(_squash(path_out[i:])) - 1
                i += 1
            args, path_out = path_out[:i], path_out[i:]
    return path_out, fn(js, args)


# ---------------------------------------------------------------- get


def get(js: bytes | str, path: bytes | str) -> Result:
    """gjson ``Get``: the value at ``path`` in ``js``."""
    doc = _b(js)
    return _get(doc, _b(path), doc, 0)


def _get(js: bytes, path: bytes, root: bytes, base: int) -> Result:
    if len(path) > 1:
        if path[0] in (_AT, _BANG):
            out = _exec_modifier(js, path) if path[0] == _AT else _exec_static(path)
            if out is not None:
                path, rjson = out
                rroot, rbase = (root, base) if rjson is js else (rjson, 0)
                if path and path[0] in (_PIPE, _DOT):
                    res = _get(rjson, path[1:], rroot, rbase)
                    res.index = 0
                    res.indexes = None
                    return res
                return _parse_at(rjson, rroot, rbase)
        if path[0] in (_LB, _LC):
            kind = path[0]
            parsed = _parse_sub_selectors(path)
            if parsed is not None:
                subs, path = parsed
                if not path or path[0] in (_PIPE, _DOT):
                    b = bytearray((kind,))
                    count = 0
                    for name, sub_path in subs:
                        res = _get(js, sub_path, root, base)
                        if not res.exists():
                            continue
                        if count > 0:
                            b.append(_COMMA)
                        if kind == _LC:
                            if name:
                                if name[0] == _Q and valid(name):
                                    b += name
                                else:
                                    b += _append_json_string(name)
                            else:
                                last = _name_of_last(sub_path)
                                b += _append_json_string(last if _is_simple_name(last) else b"_")
                            b.append(_COLON)
                        raw = res.raw
                        if not raw:
                            raw = res.string() or b"null"
                        b += raw
                        count += 1
                    b.append(kind + 2)
                    out_res = Result(JSON, bytes(b))
                    if path:
                        out_res = out_res.get(path[1:])
                    out_res.index = 0
                    return out_res
    c = _Ctx(js, root, base)
    if len(path) >= 2 and path[0] == _DOT and path[1] == _DOT:
        _parse_array(c, 0, path[2:])
    else:
        for i, ch in enumerate(js):
            if ch == _LC:
                _parse_object(c, i + 1, path)
                break
            if ch == _LB:
                _parse_array(c, i + 1, path)
                break
    if c.piped:
        res = c.value.get(c.pipe)
        res.index = 0
        return res
    if c.value.raw and not c.calcd:
        idx = 0
        if c.value.root is root:
            idx = c.value.origin - base
            if idx < 0 or idx >= len(js):
                idx = 0
        c.value.index = idx
    return c.value
