"""Go libraries River's bytes depend on, re-implemented rule for rule.

River for Python must write the bytes Go River writes (args JSON, unique keys,
timestamps), so the parts of Go's libraries that decide those bytes live here,
one module per library, apart from River's own rules:

* ``encoding_json``: Go's ``encoding/json`` (encoding, and decoding into args types).
* ``gotime``: Go's ``time.Time`` (nanoseconds and location) and its text forms.
* ``gjson``, ``sjson``, ``match``: tidwall's gjson, sjson and match, which River
  uses to build unique keys.
* ``utf8``: Go's ``unicode/utf8`` decoding, shared by gjson and match.
"""
