"""tidwall/match's wildcard patterns as gjson uses them."""

from __future__ import annotations

from river_protocol.golang.match import match_limit


def test_star_and_question_mark() -> None:
    assert match_limit(b"hello", b"h*o", 100)
    assert match_limit(b"hello", b"h?llo", 100)
    assert not match_limit(b"hello", b"h?lo", 100)
    assert match_limit(b"", b"*", 100)
    assert not match_limit(b"", b"?", 100)


def test_question_mark_is_one_rune_not_one_byte() -> None:
    assert match_limit("é".encode(), b"?", 100)
    assert not match_limit("é".encode(), b"??", 100)


def test_backslash_escapes_a_wildcard() -> None:
    assert match_limit(b"a*", b"a\\*", 100)
    assert not match_limit(b"ab", b"a\\*", 100)


def test_pattern_over_budget_never_matches() -> None:
    subject = b"a" * 30 + b"b"
    # The same pattern matches within gjson's budget and reports no match once it runs out.
    assert match_limit(subject, b"*a*a*b", 10000)
    assert not match_limit(subject, b"*a*a*b", 0)
