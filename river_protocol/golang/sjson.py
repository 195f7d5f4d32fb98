"""Just enough of tidwall/sjson (v1.2.5) to build River's unique keys: ``set_raw``.

River writes each unique-key value into a fresh document with ``SetRawBytes``,
so args member names are sjson *paths* too: a simple path (names and indexes
joined by ``.``, ``\\`` escaping) builds the document piece by piece, while a
path holding gjson syntax only replaces values gjson already finds. Whether a
value exists is decided by ``gjson.Result.index``, as in Go.
"""

from __future__ import annotations

from dataclasses import dataclass

from river_protocol.errors import UniqueKeyError
from river_protocol.golang.encoding_json import encode_go_string
from river_protocol.golang.gjson import JSON, Result, get, parse

_Q, _BS, _LB, _RB, _LC, _RC = 0x22, 0x5C, 0x5B, 0x5D, 0x7B, 0x7D
_DOT, _PIPE, _HASH, _AT, _STAR, _QM, _COMMA, _SP = 0x2E, 0x7C, 0x23, 0x40, 0x2A, 0x3F, 0x2C, 0x20


@dataclass
class _SetPath:
    part: bytes = b""
    gpart: bytes = b""
    path: bytes = b""
    force: bool = False
    more: bool = False


class _NoChange(Exception):
    pass


def _simple(ch: int) -> bool:
    return ch not in (_PIPE, _HASH, _AT, _STAR, _QM)


def _parse_path(path: bytes) -> tuple[_SetPath, bool]:
    r = _SetPath()
    if path[:1] == b":":
        r.force = True
        path = path[1:]
    n = len(path)
    i = 0
    while i < n:
        ch = path[i]
        if ch == _DOT:
            r.part = r.gpart = path[:i]
            r.path, r.more = path[i + 1 :], True
            return r, True
        if not _simple(ch):
            return r, False
        if ch == _BS:
            epart = bytearray(path[:i])
            gpart = bytearray(path[: i + 1])
            i += 1
            if i < n:
                epart.append(path[i])
                gpart.append(path[i])
                i += 1
                while i < n:
                    ch = path[i]
                    if ch == _BS:
                        gpart.append(_BS)
                        i += 1
                        if i < n:
                            epart.append(path[i])
                            gpart.append(path[i])
                        i += 1
                        continue
                    if ch == _DOT:
                        r.part, r.gpart = bytes(epart), bytes(gpart)
                        r.path, r.more = path[i + 1 :], True
                        return r, True
                    if not _simple(ch):
                        return r, False
                    epart.append(ch)
                    gpart.append(ch)
                    i += 1
            r.part, r.gpart = bytes(epart), bytes(gpart)
            return r, True
        i += 1
    r.part = r.gpart = path
    return r, True


def _atoui(r: _SetPath) -> tuple[int, bool]:
    if r.force:
        return 0, False
    n = 0
    for ch in r.part:
        if not 0x30 <= ch <= 0x39:
            return 0, False
        n = n * 10 + ch - 0x30
    return n, True


def _stringify_key(s: bytes) -> bytes:
    if any(ch < _SP or ch > 0x7F or ch in (_Q, _BS) for ch in s):
        # sjson hands such keys to Go's json.Marshal.
        return encode_go_string(s)
    return b'"' + s + b'"'


def _append_build(buf: bytearray, array: bool, paths: list[_SetPath], raw: bytes) -> None:
    if not array:
        buf += _stringify_key(paths[0].part) + b":"
    if len(paths) > 1:
        n, numeric = _atoui(paths[1])
        if numeric or (not paths[1].force and paths[1].part == b"-1"):
            buf += b"[" + b"null," * n
            _append_build(buf, True, paths[1:], raw)
            buf += b"]"
        else:
            buf += b"{"
            _append_build(buf, False, paths[1:], raw)
            buf += b"}"
    else:
        buf += raw


def _append_raw_paths(buf: bytearray, jstr: bytes, paths: list[_SetPath], raw: bytes) -> None:
    res = get(jstr, paths[0].gpart)
    if res.index > 0:
        buf += jstr[: res.index]
        if len(paths) > 1:
            _append_raw_paths(buf, res.raw, paths[1:], raw)
        else:
            buf += raw
        buf += jstr[res.index + len(res.raw) :]
        return
    n, numeric = _atoui(paths[0])
    if all(ch <= _SP for ch in jstr):
        jstr = b"[]" if numeric else b"{}"
    jsres = parse(jstr)
    if jsres.type != JSON:
        jstr = b"[]" if numeric else b"{}"
        jsres = parse(jstr)
    jraw = jsres.raw
    comma = False
    for ch in jraw[1:]:
        if ch <= _SP:
            continue
        if ch not in (_RC, _RB):
            comma = True
        break
    if jraw[0] == _LC:
        end = len(jraw) - 1
        while end > 0 and jraw[end] != _RC:
            end -= 1
        buf += jraw[:end]
        if comma:
            buf.append(_COMMA)
        _append_build(buf, False, paths, raw)
        buf.append(_RC)
        return
    if not numeric:
        if paths[0].part == b"-1" and not paths[0].force:
            njson = _trim(jraw)
            if njson[-1:] == b"]":
                njson = njson[:-1]
            buf += njson
            if comma:
                buf.append(_COMMA)
            _append_build(buf, True, paths, raw)
            buf.append(_RB)
            return
        part = paths[0].part.decode("utf-8", "surrogateescape")
        raise UniqueKeyError(f"cannot set array element for non-numeric key '{part}'")
    buf.append(_LB)
    items = jsres.array()
    buf += b",".join(item.raw for item in items)
    if not items:
        buf += b"null," * n
    else:
        buf += b",null" * (n - len(items))
        if comma:
            buf.append(_COMMA)
    _append_build(buf, True, paths, raw)
    buf.append(_RB)


def _trim(s: bytes) -> bytes:
    a, b = 0, len(s)
    while a < b and s[a] <= _SP:
        a += 1
    while b > a and s[b - 1] <= _SP:
        b -= 1
    return s[a:b]


def _values(res: Result) -> list[Result]:
    values: list[Result] = []

    def keep(_key: Result, value: Result) -> bool:
        values.append(value)
        return True

    res.for_each(keep)
    return values


def _set_complex_path(jstr: bytes, path: bytes, raw: bytes) -> bytes:
    res = get(jstr, path)
    if not res.exists() or not (res.index != 0 or res.indexes):
        raise _NoChange
    if res.index != 0:
        jstr = jstr[: res.index] + raw + jstr[res.index + len(res.raw) :]
    if res.indexes:
        vals = _values(res)
        if len(vals) != len(res.indexes):
            raise _NoChange
        ordered = sorted(zip(res.indexes, vals, strict=True), key=lambda p: -p[0])
        for index, vres in ordered:
            jstr = jstr[:index] + raw + jstr[index + len(vres.raw) :]
    return jstr


def set_raw(js: bytes, path: bytes | str, raw: bytes) -> bytes:
    """sjson ``SetRawBytes``: ``js`` with the raw JSON ``raw`` placed at ``path``.

    Raises ``UniqueKeyError`` with sjson's message where sjson returns an error.
    """
    p = path.encode() if isinstance(path, str) else path
    if not p:
        raise UniqueKeyError("path cannot be empty")
    paths: list[_SetPath] = []
    r, simple = _parse_path(p)
    if simple:
        paths.append(r)
        while r.more:
            r, simple = _parse_path(r.path)
            if not simple:
                break
            paths.append(r)
    try:
        if not simple:
            return _set_complex_path(js, p, raw)
        buf = bytearray()
        _append_raw_paths(buf, js, paths, raw)
        return bytes(buf)
    except _NoChange:
        return js
