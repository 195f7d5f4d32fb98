"""JSON-RPC 2.0 over stdio, one message per line, with the protocol's error codes.

Requests are answered one at a time and in order (the harness waits for each
answer). Requests are read with exact numbers (``Decimal`` for every
non-integer literal), so metadata passes through unrounded; answers are
written by ``dumps``, which also writes ``Decimal`` and ``RawJSON`` exactly.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import IO, Any

log = logging.getLogger(__name__)

# JSON-RPC 2.0's own codes, then River's conformance protocol's.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
NOT_FOUND = -32001
REJECTED = -32002


class AdapterError(Exception):
    """A request that fails with ``code``; anything else a handler raises is ``REJECTED``."""

    code = REJECTED

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidParams(AdapterError):
    code = INVALID_PARAMS


class NotFound(AdapterError):
    code = NOT_FOUND


class Rejected(AdapterError):
    code = REJECTED


@dataclass(frozen=True)
class RawJSON:
    """JSON text written into an answer as it is (a stored column, already valid JSON)."""

    text: str


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str | bytes) -> Any:
    """JSON with exact numbers; NaN and Infinity, which JSON lacks, are refused."""
    return json.loads(text, parse_float=Decimal, parse_constant=_reject_constant)


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} is not a JSON number")
        out.append(str(value))
    elif isinstance(value, float):
        out.append(json.dumps(value, allow_nan=False))
    elif isinstance(value, RawJSON):
        out.append(value.text)
    elif isinstance(value, dict):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            out.append(json.dumps(str(key), ensure_ascii=False))
            out.append(":")
            _write(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def dumps(value: Any) -> str:
    """One line of JSON (no newline: strings are escaped, raw texts are stored JSON)."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


Handler = Callable[[str, Any], Any]


def respond(handle: Handler, line: str) -> dict[str, Any]:
    """The answer to one request line."""
    response: dict[str, Any] = {"jsonrpc": "2.0", "id": 0}
    try:
        request = loads(line)
    except (ValueError, RecursionError) as exc:
        return {**response, "error": _error(PARSE_ERROR, f"invalid JSON: {exc}")}
    # As Go decodes the envelope: a field of the wrong type fails the whole decode.
    if not isinstance(request, dict):
        return {**response, "error": _error(PARSE_ERROR, "a request must be a JSON object")}
    request_id = request.get("id", 0)
    if request_id is None:
        request_id = 0
    if isinstance(request_id, bool) or not isinstance(request_id, int):
        return {**response, "error": _error(PARSE_ERROR, "the request id must be an integer")}
    method = request.get("method") or ""
    if not isinstance(method, str):
        return {**response, "error": _error(PARSE_ERROR, "the method must be a string")}
    jsonrpc = request.get("jsonrpc")
    if jsonrpc is not None and not isinstance(jsonrpc, str):
        return {**response, "error": _error(PARSE_ERROR, "jsonrpc must be a string")}
    response["id"] = request_id
    if request.get("jsonrpc") != "2.0":
        return {**response, "error": _error(INVALID_REQUEST, "jsonrpc must be 2.0")}
    try:
        result = handle(method, request.get("params"))
    except AdapterError as exc:
        return {**response, "error": _error(exc.code, str(exc))}
    except Exception as exc:  # River refused the request or could not complete it
        log.debug("%s failed", method, exc_info=True)
        return {**response, "error": _error(REJECTED, f"{type(exc).__name__}: {exc}")}
    return {**response, "result": {} if result is None else result}


def _error(code: int, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}


def serve(handle: Handler, lines: Iterable[str], output: IO[str]) -> None:
    """Answer each request line until the input ends (blank lines are skipped)."""
    for line in lines:
        if not line.strip():
            continue
        response = respond(handle, line)
        try:
            text = dumps(response)
        except (TypeError, ValueError) as exc:
            log.exception("could not encode the answer")
            text = dumps({"jsonrpc": "2.0", "id": response["id"],
                          "error": _error(INTERNAL_ERROR, f"could not encode the answer: {exc}")})
        output.write(text + "\n")
        output.flush()
