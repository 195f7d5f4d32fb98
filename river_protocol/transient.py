"""Which database failures a retry can cure: the rule the completer (and every machine that
retries) goes by, by SQLSTATE, so it holds for any driver.

Transient: the connection or the server (class 08, and the shutdowns and cancels of class
57), a transaction rolled back for concurrency (class 40: serialization failure, deadlock),
resources the server lacked for a moment (class 53: too many connections, out of memory),
a lock not available or an object in use (55P03, 55006), and a prepared statement that went
missing or clashed (26000, 42P05: a transaction pooler moved the session, and the connection
then stops preparing). Any other SQLSTATE (a data error, a constraint, a missing table) names
something wrong with the statement itself: sent again unchanged it fails again.

A failure without an SQLSTATE is transient unless the driver says it is fatal: an outage in
another shape, a pool wait that timed out, an error this rule does not know.
"""

from __future__ import annotations

_TRANSIENT_CLASSES = frozenset({"08", "40", "53", "57"})
_TRANSIENT_CODES = frozenset({"26000", "42P05", "55P03", "55006", "58000", "58030"})


def transient_sqlstate(sqlstate: str | None) -> bool:
    """Whether a failure with this SQLSTATE (None: none known) may succeed when retried."""
    if sqlstate is None:
        return True
    return sqlstate[:2] in _TRANSIENT_CLASSES or sqlstate in _TRANSIENT_CODES
