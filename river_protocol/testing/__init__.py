"""Property-testing River's rules: hypothesis strategies and a job-lifecycle harness.

``river_protocol.testing`` is a test-time helper package. It needs
`hypothesis <https://hypothesis.readthedocs.io>`_ (``pip install
river-python[test]``); nothing else in River imports it, so River itself runs
without hypothesis.

Strategies (``river_protocol.testing.strategies``)
    Values River accepts or produces, for ``@given``:

    * ``aware_datetimes()``, ``clocks()`` (a start plus strictly increasing steps);
    * ``job_states()``, ``job_kinds()``, ``queue_names()``, ``tags()``;
    * ``job_rows(state=..., min_attempt=..., max_max_attempts=...)``: consistent
      rows (``finalized_at`` set iff finalized, ``attempt <= max_attempts``,
      ``len(errors) <= attempt``, attempted rows carry ``attempted_by``);
    * ``outcomes()``: ``Completed``, ``Snooze``, ``Cancel``, ``Discard``,
      ``Failed``, ``Interrupted``;
    * ``json_values()``, ``args_values()`` (Go-encodable dicts and the sample
      dataclass args ``SampleArgs``/``NestedSampleArgs``);
    * ``insert_opts()``, ``unique_opts()``, ``invalid_unique_opts()``;
    * ``cron_expressions()``: valid five-field cron expressions;
    * ``event_sequences("producer" | "completer" | "elector")``: steps for
      ``harness.drive``.

    Example::

        from hypothesis import given
        from river_protocol.outcomes import Failed, outcome_to_update
        from river_protocol.states import JobState
        from river_protocol.testing import strategies as rst

        @given(rst.job_rows(state=JobState.RUNNING), rst.aware_datetimes())
        def test_failures_never_complete(row, now):
            update = outcome_to_update(row, Failed("boom"), now=now, started_at=now, rand=0.5)
            assert update.state is not JobState.COMPLETED

Lifecycle (``river_protocol.testing.lifecycle``)
    ``JobLifecycleMachine`` is a hypothesis ``RuleBasedStateMachine`` over a
    model job table: inserts (available/scheduled/pending, unique or not),
    claims, work outcomes through ``outcome_to_update``/``apply_set_state``,
    stale completions, scheduler, rescuer, cancel/retry/delete APIs, job
    cleaner and clock. Each transition is checked against River's state table
    and each step against River's invariants (attempt/snooze/error accounting,
    ``finalized_at`` iff finalized, no claim of a finalized job, unique keys held
    once). Plug in your own rules::

        from hypothesis import settings
        from river_protocol.testing.lifecycle import JobLifecycleMachine, run_lifecycle

        class MyLifecycle(JobLifecycleMachine):
            retry_policy = MyRetryPolicy()
            unique_opts = UniqueOpts(by_args=True, by_state=(...))

        TestMyLifecycle = MyLifecycle.TestCase            # collected by pytest/unittest
        # or, inline:
        run_lifecycle(retry_policy=MyRetryPolicy(), settings=settings(max_examples=50))

    A broken rule raises ``InvariantViolation`` (an ``AssertionError``) and
    hypothesis shrinks it to a short sequence of steps.

Machine harness (``river_protocol.testing.harness``)
    ``drive(machine, steps, start=...)`` plays ``event_sequences`` against a
    ``Producer``, ``Completer`` or ``Elector`` as a strict driver: ticks at
    every deadline passed, answers each in-flight intent exactly once with a
    plausible result, and checks the driver contract and machine invariants
    (one claim in flight, never more active jobs than workers, no completer
    update lost, no leadership past the trust window, ``lost_leadership``
    before a resign).
"""

from __future__ import annotations

try:
    import hypothesis  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "river_protocol.testing needs hypothesis; install it with: pip install 'river-python[test]'"
    ) from exc

__all__ = ["harness", "lifecycle", "strategies"]
