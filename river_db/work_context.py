"""What a worker's ``WorkContext`` holds on either driver, written once.

The drivers' ``WorkContext`` add only what waits: ``complete_in`` and
``checkpoint`` (blocking or awaited) and, on trio, async steps.
"""

from __future__ import annotations

from typing import Any

from river_db.resumable import ResumableSteps
from river_protocol.job import JobRow
from river_protocol.outcomes import record_output
from river_protocol.work import CancelCause


class WorkContextBase(ResumableSteps):
    """Per-run context: the job row, decoded args, the client and the cancellation token."""

    def __init__(self, job: JobRow, args: Any, client: Any, token: Any) -> None:
        self.job = job
        self.args = args
        self.client = client
        self.token = token
        self.metadata_updates: dict[str, Any] = {}
        self.completed_in_tx = False

    @property
    def cancelled(self) -> bool:
        return bool(self.token.is_set())

    @property
    def cancel_cause(self) -> CancelCause | None:
        cause: CancelCause | None = self.token.cause
        return cause

    def raise_if_cancelled(self) -> None:
        self.token.raise_if_cancelled()

    def record_output(self, value: Any) -> None:
        """Store ``value`` (JSON-encodable, ≤ 32 MB encoded) as the job's ``metadata.output``."""
        self.metadata_updates.update(record_output(value))
