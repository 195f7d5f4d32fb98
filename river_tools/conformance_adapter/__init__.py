"""An adapter for River's cross-language conformance harness: ``python -m river_tools.conformance_adapter``.

River's repository carries a harness (``conformance/harness``) that runs two
implementations of River against one database and checks that each reads and
works what the other writes. It talks to each implementation through an
adapter process speaking River's conformance protocol (``conformance/protocol``):
JSON-RPC 2.0 over stdio, one message per line, configured by the environment
variables ``RIVER_CONFORMANCE_DRIVER`` (``postgres`` or ``sqlite``),
``RIVER_CONFORMANCE_DATABASE_URL`` and ``RIVER_CONFORMANCE_APPLICATION_NAME``.
This package is that adapter for ``river_sync``: ``jsonrpc`` (the transport and
error codes), ``params`` (strict decoding), ``normalize`` (job rows in the
protocol's form), ``worker`` (the built-in worker and the client's settings)
and ``server`` (the methods). Logs go to stderr; stdout carries answers only.
"""
