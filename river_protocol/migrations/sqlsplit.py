"""Split a SQL script into single statements the way SQLite's ``sqlite3_complete`` sees them.

sqlite3's ``execute`` runs one statement, so a migration script is cut at top-level
semicolons: not inside quotes (``'`` ``"`` `````` ``[]``), comments, or the ``BEGIN ... END``
body of ``CREATE TRIGGER``. Pieces holding only comments and whitespace are dropped.
"""

from __future__ import annotations

_CLOSERS = {"'": "'", '"': '"', "`": "`", "[": "]"}


def split_statements(script: str) -> list[str]:
    statements: list[str] = []
    start = 0
    i = 0
    n = len(script)
    words: list[str] = []  # top-level words of the current statement, upper-cased
    word_start: int | None = None
    has_code = False

    def end_word(at: int) -> None:
        nonlocal word_start
        if word_start is not None:
            words.append(script[word_start:at].upper())
            word_start = None

    while i < n:
        ch = script[i]
        if ch.isalnum() or ch == "_":
            if word_start is None:
                word_start = i
            has_code = True
            i += 1
            continue
        end_word(i)
        if ch in _CLOSERS:
            close = script.find(_CLOSERS[ch], i + 1)
            i = n if close < 0 else close + 1
            has_code = True
            words.append("")  # a quoted token breaks "END ;" adjacency like any other token
            continue
        if script.startswith("--", i):
            newline = script.find("\n", i)
            i = n if newline < 0 else newline + 1
            continue
        if script.startswith("/*", i):
            close = script.find("*/", i + 2)
            i = n if close < 0 else close + 2
            continue
        if ch == ";" and not (_is_trigger(words) and (not words or words[-1] != "END")):
            if has_code:
                statements.append(script[start:i].strip())
            start = i + 1
            words.clear()
            has_code = False
        elif not ch.isspace():
            has_code = True
            words.append(ch)
        i += 1
    end_word(n)
    if has_code and script[start:].strip():
        statements.append(script[start:].strip())
    return statements


def _is_trigger(words: list[str]) -> bool:
    head = [w for w in words[:4] if w]
    if head[:1] != ["CREATE"]:
        return False
    rest = head[1:]
    if rest[:1] in (["TEMP"], ["TEMPORARY"]):
        rest = rest[1:]
    return rest[:1] == ["TRIGGER"]
