"""river_sync's hand-written modules and their river_anyio twins mirror each other name for name
(issue 8.4); river_trio and river_asyncio match with no difference at all (one implementation,
river_anyio, bound to two event loops).

The rest of river_sync is generated from river_anyio (tools/async_to_sync.py, checked by
tests/test_generated_sync.py), so it cannot drift; this file compares only what is still
written twice: the client's runtime (``start``/``run``, entering and leaving; its calls are
generated, ``client_api``) and the signal loop. For each pair, the
public names (``dir`` without a leading underscore, plus the context-manager and iteration
protocols) and each callable's parameters (names, kinds, defaults) must match, ``async def``
and ``def`` counting as the same. The only differences allowed are the ones in
``ALLOWED_DIFFERENCES``, each with its reason; an entry that no longer matches a real
difference fails too, so the table cannot go stale.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import river_asyncio
import river_asyncio.testing
import river_sync
import river_trio
import river_trio.testing

# Protocol methods compared besides the public names: which way a user enters, iterates and builds one.
PROTOCOL_DUNDERS = ("__init__", "__enter__", "__exit__", "__aenter__", "__aexit__",
                    "__iter__", "__next__", "__aiter__", "__anext__")


@dataclass(frozen=True)
class Allowed:
    """One intended difference in ``pair``: ``sync`` exists only on river_sync, ``trio`` only on
    river_trio (either may be None). Members are attribute names; a parameter is ``"method(param)"``,
    or ``"(param)"`` for a function pair."""

    pair: str
    sync: str | None
    trio: str | None
    reason: str


ALLOWED_DIFFERENCES: tuple[Allowed, ...] = (
    Allowed("Client", "start", "run", "a thread client starts and returns; a trio client runs in a nursery"),
    Allowed("Client", "__enter__", "__aenter__", "with / async with"),
    Allowed("Client", "__exit__", "__aexit__", "with / async with"),
    Allowed("Client", "close", "aclose", "trio's async close is aclose(), by trio's naming"),
    Allowed("Client", None, "ANYIO_BACKEND", "the event loop an async client class is bound to"),
    Allowed("run_until_signalled", None, "(task_status)", "trio's runs under nursery.start"),
)


# ---------------------------------------------------------------- the comparer


def _params(fn: Any) -> dict[str, tuple[str, Any]] | None:
    """name -> (kind, default) of a callable's parameters, without self/cls; None if it has none to read."""
    if isinstance(fn, (staticmethod, classmethod)):
        fn = fn.__func__
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    return {p.name: (p.kind.name, p.default) for p in params}


def _kind(value: Any) -> str:
    if isinstance(value, property):
        return "property"
    if isinstance(value, type):
        return "class"
    if callable(value) or isinstance(value, (staticmethod, classmethod)):
        return "callable"
    return "value"


def surface(obj: Any) -> dict[str, Any]:
    """The names a user of ``obj`` sees, with their static values (not bound, not called)."""
    names = {n for n in dir(obj) if not n.startswith("_")}
    if isinstance(obj, type):
        inherited = {n for n in PROTOCOL_DUNDERS if getattr(obj, n, None) is getattr(object, n, None)}
        names |= {n for n in PROTOCOL_DUNDERS if n in dir(obj)} - inherited
        return {n: inspect.getattr_static(obj, n) for n in names}
    return {n: getattr(obj, n) for n in names}


def _same_default(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def param_drifts(where: str, sync_fn: Any, trio_fn: Any) -> list[tuple[str | None, str | None, str]]:
    """(sync-only, trio-only, message) for each parameter difference; ``where`` prefixes the member key."""
    a, b = _params(sync_fn), _params(trio_fn)
    if a is None or b is None:
        return []
    drifts: list[tuple[str | None, str | None, str]] = []
    for name in sorted(a.keys() - b.keys()):
        drifts.append((f"{where}({name})", None, f"parameter {where}({name}) only on river_sync"))
    for name in sorted(b.keys() - a.keys()):
        drifts.append((None, f"{where}({name})", f"parameter {where}({name}) only on river_trio"))
    order_a = [n for n in a if n in b]
    order_b = [n for n in b if n in a]
    if order_a != order_b:
        drifts.append((f"{where}()", f"{where}()", f"{where}: parameter order {order_a} vs {order_b}"))
    for name in order_a:
        (kind_a, def_a), (kind_b, def_b) = a[name], b[name]
        key = f"{where}({name})"
        if kind_a != kind_b:
            drifts.append((key, key, f"{key}: kind {kind_a} vs {kind_b}"))
        elif not _same_default(def_a, def_b):
            drifts.append((key, key, f"{key}: default {def_a!r} vs {def_b!r}"))
    return drifts


def compare(pair: str, sync_obj: Any, trio_obj: Any,
            allowed: Iterable[Allowed] = ALLOWED_DIFFERENCES) -> tuple[list[str], set[Allowed]]:
    """(drifts not allowed, allow-list entries used) for one mirrored pair."""
    rules = [r for r in allowed if r.pair == pair]
    sync_only: set[str] = set()
    trio_only: set[str] = set()
    messages: dict[tuple[str | None, str | None], str] = {}
    if isinstance(sync_obj, (list, tuple, set, frozenset)):
        sync_only, trio_only = set(sync_obj) - set(trio_obj), set(trio_obj) - set(sync_obj)
        for n in sync_only:
            messages[(n, None)] = f"{n} only in river_sync's list"
        for n in trio_only:
            messages[(None, n)] = f"{n} only in river_trio's list"
    elif not isinstance(sync_obj, type) and callable(sync_obj):
        for s, t, msg in param_drifts("", sync_obj, trio_obj):
            messages[(s, t)] = msg
    else:
        a, b = surface(sync_obj), surface(trio_obj)
        for n in a.keys() - b.keys():
            messages[(n, None)] = f"{n} only on river_sync"
        for n in b.keys() - a.keys():
            messages[(None, n)] = f"{n} only on river_trio"
        for n in sorted(a.keys() & b.keys()):
            if _kind(a[n]) != _kind(b[n]):
                messages[(n, n)] = f"{n}: a {_kind(a[n])} on river_sync, a {_kind(b[n])} on river_trio"
                continue
            fa, fb = a[n], b[n]
            if isinstance(fa, property):
                fa, fb = fa.fget, fb.fget
            if _kind(a[n]) in ("callable", "property"):
                for s, t, msg in param_drifts(n, fa, fb):
                    messages[(s, t)] = msg
    used: set[Allowed] = set()
    left: list[str] = []
    for (s, t), msg in sorted(messages.items(), key=lambda kv: kv[1]):
        rule = next((r for r in rules if _covers(r, s, t, messages)), None)
        if rule is None:
            left.append(f"{pair}: {msg}")
        else:
            used.add(rule)
    return left, used


Found = dict[tuple[str | None, str | None], str]


def _covers(rule: Allowed, s: str | None, t: str | None, found: Found) -> bool:
    """Whether ``rule`` allows the difference (s, t). A rule naming both sides (start/run) allows
    each one-sided member only while its counterpart is one-sided too."""
    if s is not None and t is not None:
        return (rule.sync, rule.trio) == (s, t)
    if s is not None:
        return rule.sync == s and (rule.trio is None or (None, rule.trio) in found)
    return rule.trio == t and (rule.sync is None or (rule.sync, None) in found)


# ---------------------------------------------------------------- the pairs


PAIRS: dict[str, tuple[Any, Any]] = {
    "Client": (river_sync.Client, river_trio.Client),
    "run_until_signalled": (river_sync.run_until_signalled, river_trio.run_until_signalled),
}


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_mirrored_pair_matches_but_for_the_allowed_differences(pair: str) -> None:
    sync_obj, trio_obj = PAIRS[pair]
    drifts, used = compare(pair, sync_obj, trio_obj)
    assert drifts == []
    stale = [r for r in ALLOWED_DIFFERENCES if r.pair == pair and r not in used]
    assert stale == [], "allow-list entries that no longer match a difference"


def test_instances_carry_the_same_public_attributes(tmp_path: Path) -> None:
    # What __init__ sets (client.jobs, client.queues...) is not in dir(class); compare built ones.
    with river_sync.Migrator(str(tmp_path / "parity.db")) as migrator:  # a client opens no missing file
        migrator.migrate_up()
    sync_client = river_sync.Client(tmp_path / "parity.db")
    trio_client = river_trio.Client(tmp_path / "parity.db")
    try:
        sync_attrs = {n for n in dir(sync_client) if not n.startswith("_")} - set(surface(river_sync.Client))
        trio_attrs = {n for n in dir(trio_client) if not n.startswith("_")} - set(surface(river_trio.Client))
        assert sync_attrs == trio_attrs
    finally:
        sync_client.stop()


def test_every_allowed_difference_names_a_known_pair_and_a_reason() -> None:
    for rule in ALLOWED_DIFFERENCES:
        assert rule.pair in PAIRS and rule.reason.strip() and (rule.sync or rule.trio)


# ---------------------------------------------------------------- trio and asyncio: no differences


ASYNC_PAIRS: dict[str, tuple[Any, Any]] = {
    "Client": (river_trio.Client, river_asyncio.Client),
    "InlineClient": (river_trio.testing.InlineClient, river_asyncio.testing.InlineClient),
    "inline_client": (river_trio.testing.inline_client, river_asyncio.testing.inline_client),
    "__all__": (river_trio.__all__, river_asyncio.__all__),
    "testing.__all__": (river_trio.testing.__all__, river_asyncio.testing.__all__),
}

# Bound to their event loop: each package's own (the rest are one object, checked below).
LOOP_BOUND = {"Client", "InlineClient", "inline_client"}


@pytest.mark.parametrize("pair", sorted(ASYNC_PAIRS))
def test_trio_and_asyncio_match_with_no_difference(pair: str) -> None:
    trio_obj, asyncio_obj = ASYNC_PAIRS[pair]
    drifts, _ = compare(pair, trio_obj, asyncio_obj, allowed=())
    assert drifts == []


def test_trio_and_asyncio_export_the_same_objects_but_their_loop_bound_ones() -> None:
    for package, other in ((river_trio, river_asyncio), (river_trio.testing, river_asyncio.testing)):
        for name in package.__all__:
            same = getattr(package, name) is getattr(other, name)
            assert same is (name not in LOOP_BOUND), f"{package.__name__}.{name}"
    assert (river_trio.Client.ANYIO_BACKEND, river_asyncio.Client.ANYIO_BACKEND) == ("trio", "asyncio")
    assert river_trio.Client.__mro__[1] is river_asyncio.Client.__mro__[1]  # one shared class
    assert river_trio.testing.InlineClient._client_class is river_trio.Client
    assert river_asyncio.testing.InlineClient._client_class is river_asyncio.Client


def test_trio_and_asyncio_instances_carry_the_same_public_attributes(tmp_path: Path) -> None:
    trio_client = river_trio.Client(tmp_path / "parity.db")
    asyncio_client = river_asyncio.Client(tmp_path / "parity.db")
    for trio_obj, asyncio_obj in ((trio_client, asyncio_client),
                                  (trio_client.subscribe(), asyncio_client.subscribe())):
        assert {n for n in dir(trio_obj) if not n.startswith("_")} == \
            {n for n in dir(asyncio_obj) if not n.startswith("_")}


# ---------------------------------------------------------------- the comparer catches drift


class _SyncThing:
    def __init__(self, url: str, *, size: int = 1) -> None: ...

    def get(self, timeout: float | None = None) -> int:
        return 0

    def close(self) -> None: ...

    @property
    def name(self) -> str:
        return ""


class _TrioThing:
    def __init__(self, url: str, *, size: int = 1) -> None: ...

    async def get(self, timeout: float | None = None) -> int:
        return 0

    async def aclose(self) -> None: ...

    @property
    def name(self) -> str:
        return ""


def _variant(**members: Any) -> type:
    return type("_TrioVariant", (_TrioThing,), members)


CLOSE = (Allowed("Thing", "close", "aclose", "test"),)


def test_comparer_treats_async_and_sync_methods_alike() -> None:
    assert compare("Thing", _SyncThing, _TrioThing, CLOSE) == ([], set(CLOSE))


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"flush": lambda self: None}, "flush only on river_trio"),
        ({"get": lambda self: 0}, "parameter get(timeout) only on river_sync"),
        ({"get": lambda self, timeout=None, block=True: 0}, "parameter get(block) only on river_trio"),
        ({"get": lambda self, timeout=5.0: 0}, "get(timeout): default None vs 5.0"),
        ({"get": lambda self, *, timeout=None: 0},
         "get(timeout): kind POSITIONAL_OR_KEYWORD vs KEYWORD_ONLY"),
        ({"__init__": lambda self, url, *, size=2: None}, "__init__(size): default 1 vs 2"),
        ({"name": lambda self: ""}, "name: a property on river_sync, a callable on river_trio"),
        ({"__aenter__": lambda self: self}, "__aenter__ only on river_trio"),
    ],
)
def test_comparer_catches_a_drift(extra: dict[str, Callable[..., Any]], expected: str) -> None:
    drifts, _ = compare("Thing", _SyncThing, _variant(**extra), CLOSE)
    assert drifts == [f"Thing: {expected}"]


def test_comparer_catches_a_one_sided_member_an_unrelated_rule_does_not_cover() -> None:
    rules = (Allowed("Thing", "close", "aclose", "test"), Allowed("Other", None, "flush", "elsewhere"))
    drifts, _ = compare("Thing", _SyncThing, _variant(flush=lambda self: None), rules)
    assert drifts == ["Thing: flush only on river_trio"]


def test_comparer_reports_function_and_list_drift() -> None:
    def sync_fn(client: Any, *, signals: tuple[int, ...] = ()) -> None: ...

    async def trio_fn(client: Any, *, signals: tuple[int, ...] = (), task_status: Any = None) -> None: ...

    assert compare("f", sync_fn, trio_fn, ())[0] == ["f: parameter (task_status) only on river_trio"]
    assert compare("l", ["A", "B"], ["A"], ())[0] == ["l: B only in river_sync's list"]
