"""River's timed components as sans-IO state machines.

Each machine takes ``handle(event, now)`` and returns an output holding the
intents to execute and its next deadline; see ``base`` for the driver
contract. Modules: ``producer``, ``completer``, ``elector``, ``maintenance``,
``periodic``, ``throttle`` and ``notifications`` (payloads and channels).
"""
