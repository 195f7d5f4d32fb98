"""tidwall/match's wildcard matching (``*`` any run, ``?`` one rune, ``\\`` escapes), over bytes.

gjson consults it for object keys in paths holding ``*`` or ``?`` and for the
``%``/``!%`` query operators. The comparison budget mirrors ``MatchLimit``: Go
stops a pathological pattern after ``len(s) * limit`` steps and reports no match.
"""

from __future__ import annotations

from river_protocol.golang.utf8 import decode_last_rune, decode_rune

_BS, _STAR, _QM = 0x5C, 0x2A, 0x3F


class _MatchStop(Exception):
    pass


def match_limit(s: bytes, pattern: bytes, limit: int) -> bool:
    """``match.MatchLimit(s, pattern, limit)``; a pattern too complex for the limit never matches."""
    if pattern == b"*":
        return True
    counter = [0]
    try:
        return _match_rec(s, pattern, len(s), counter, limit)
    except _MatchStop:
        return False


def _match_rec(s: bytes, pat: bytes, slen: int, counter: list[int], maxcomp: int) -> bool:
    if counter[0] > slen * maxcomp:
        raise _MatchStop
    counter[0] += 1
    while pat:
        wild = False
        pc, ps = (pat[0], 1) if pat[0] < 0x80 else decode_rune(pat)
        sc, ss = 0, 0
        if s:
            sc, ss = (s[0], 1) if s[0] < 0x80 else decode_rune(s)
        if pc == _QM:
            if ss == 0:
                return False
        elif pc == _STAR:
            while len(pat) > 1 and pat[1] == _STAR:
                pat = pat[1:]
            if len(pat) == 1:
                return True
            s, pat, ok = _match_trim_suffix(s, pat)
            if not ok:
                return False
            if len(pat) == 1:
                return True
            if _match_rec(s, pat[1:], slen, counter, maxcomp):
                return True
            if not s:
                return False
            wild = True
        else:
            if ss == 0:
                return False
            if pc == _BS:
                pat = pat[ps:]
                pc, ps = decode_rune(pat)
                if ps == 0:
                    return False
            if sc != pc:
                return False
        s = s[ss:]
        if not wild:
            pat = pat[ps:]
    return not s


def _match_trim_suffix(s: bytes, pat: bytes) -> tuple[bytes, bytes, bool]:
    matched = True
    while s and len(pat) > 1:
        pc, ps = decode_last_rune(pat)
        esc = False
        i = 0
        while True:
            k = len(pat) - ps - i - 1
            if k < 0 or pat[k] != _BS:
                if i & 1 == 1:
                    esc = True
                    ps += 1
                break
            i += 1
        if pc == _STAR and not esc:
            matched = True
            break
        sc, ss = decode_last_rune(s)
        if not ((pc == _QM and not esc) or pc == sc):
            matched = False
            break
        s = s[: len(s) - ss]
        pat = pat[: len(pat) - ps]
    return s, pat, matched
