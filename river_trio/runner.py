"""One task driving one machine: ``river_anyio.runner``, kept at this import path."""

from river_anyio.runner import MachineRunner, loop_deadline, utcnow

trio_deadline = loop_deadline  # the trio clock reading at which utcnow() reaches a datetime

__all__ = ["MachineRunner", "trio_deadline", "utcnow"]
