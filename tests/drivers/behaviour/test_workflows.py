"""Workflows on every client and both databases: insert, promotion in order, failure
cascades, outputs, waits, River's leader's sweep without the python line after a Go-style
completion (with it: test_workflow_sweeper.py), management."""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any, ClassVar

import pytest

from river_protocol.intents import ListWorkflowTasks
from river_protocol.workflow import (
    DEPS,
    TASK,
    WORKFLOW_ID,
    WORKFLOW_NAME,
    WaitTimeoutError,
    Workflow,
    WorkflowTaskFailedError,
)
from river_sync import Database, InsertOpts, JobDiscard, JobNotFoundError, JobState
from tests.drivers.behaviour.support import FAST, complete_as_go, fast_client, leader_client, row
from tests.drivers.harness import WAIT, Harness
from tests.drivers.leader_support import wait_until


@dataclasses.dataclass
class Step:
    kind: ClassVar[str] = "wf_step"
    name: str = ""
    fail: bool = False


def _rows(url: str, workflow_id: str) -> dict[str, Any]:
    with Database.from_url(url) as db:
        jobs = db.run(ListWorkflowTasks(workflow_id), readonly=True)
    return {j.metadata[TASK]: j for j in jobs}


def _recorder(h: Harness, order: list[str], lock: threading.Lock) -> Any:
    def work(ctx: Any, args: Step) -> Any:
        with lock:
            order.append(args.name)
        if args.fail:
            return JobDiscard("asked to fail")
        ctx.record_output({"name": args.name})
        return None

    return h.workers(work, Step)


def _album(wf: Workflow, *, fail_thumb: bool = False) -> None:
    thumbs = [wf.add(f"thumb_{i}", Step(f"thumb_{i}", fail=fail_thumb and i == 1)) for i in range(3)]
    album = wf.add("album", Step("album"), deps=thumbs)
    wf.add("email", Step("email"), deps=[album], opts=InsertOpts(max_attempts=3))


def test_insert_workflow_rows(h: Harness, client_db_url: str) -> None:
    wf = Workflow(name="album")
    _album(wf)
    with h.client(client_db_url) as client:
        inserted = client.insert_workflow(wf)
    rows = _rows(client_db_url, inserted.id)
    assert set(rows) == {"thumb_0", "thumb_1", "thumb_2", "album", "email"}
    assert all(rows[f"thumb_{i}"].state is JobState.AVAILABLE for i in range(3))
    assert rows["album"].state is JobState.PENDING and rows["email"].state is JobState.PENDING
    assert rows["album"].metadata[DEPS] == ["thumb_0", "thumb_1", "thumb_2"]
    assert rows["email"].max_attempts == 3
    assert {rows["album"].metadata[k] for k in (WORKFLOW_ID, WORKFLOW_NAME)} == {inserted.id, "album"}
    # River Pro's keys are never written.
    assert not {"workflow_id", "task", "deps", "workflow_name"} & set(rows["album"].metadata)
    assert inserted.job("album").id == rows["album"].id


def test_validation_inserts_nothing(h: Harness, client_db_url: str) -> None:
    wf = Workflow(name="bad")
    wf.add("a", Step("a"), deps=["b"])
    wf.add("b", Step("b"), deps=["a"])
    with h.client(client_db_url) as client:
        with pytest.raises(ValueError, match="cycle"):
            client.insert_workflow(wf)
        unknown = Workflow(name="unknown")
        unknown.add("a", Step("a"), deps=["nope"])
        with pytest.raises(ValueError, match="unknown task 'nope'"):
            client.insert_workflow(unknown)
        assert not client.jobs.list().jobs


def test_workflow_runs_in_dependency_order_and_waits(h: Harness, client_db_url: str) -> None:
    order: list[str] = []
    lock = threading.Lock()
    wf = Workflow(name="album")
    _album(wf)
    client = fast_client(h, client_db_url, _recorder(h, order, lock))
    with client:
        inserted = client.insert_workflow(wf)
        final = client.wait_workflow(inserted.id, timeout=WAIT)
        email = client.wait_job(inserted.job("email"), timeout=WAIT)
    assert {j.state for j in final} == {JobState.COMPLETED}
    assert email.state is JobState.COMPLETED and email.metadata["output"] == {"name": "email"}
    assert order.index("album") > max(order.index(f"thumb_{i}") for i in range(3))
    assert order.index("email") > order.index("album") and len(order) == 5


def test_discarded_dep_cancels_dependents_unless_ignored(h: Harness, client_db_url: str) -> None:
    order: list[str] = []
    lock = threading.Lock()
    wf = Workflow(name="album")
    _album(wf, fail_thumb=True)
    wf.add("cleanup", Step("cleanup"), deps=["thumb_1"], ignore_discarded_deps=True)
    client = fast_client(h, client_db_url, _recorder(h, order, lock))
    with client:
        inserted = client.insert_workflow(wf)
        with pytest.raises(WorkflowTaskFailedError) as failed:
            client.wait_workflow(inserted.id, timeout=WAIT)
        with pytest.raises(WorkflowTaskFailedError):
            client.wait_job(inserted.job("email").id, timeout=WAIT)
    rows = _rows(client_db_url, inserted.id)
    assert rows["thumb_1"].state is JobState.DISCARDED
    assert rows["album"].state is JobState.CANCELLED and rows["email"].state is JobState.CANCELLED
    assert "'thumb_1' was discarded" in rows["album"].errors[-1].error
    assert "'album' was cancelled" in rows["email"].errors[-1].error
    assert rows["cleanup"].state is JobState.COMPLETED
    assert "album" not in order and "email" not in order
    assert {j.metadata[TASK] for j in failed.value.jobs} == {"thumb_1", "album", "email"}


def test_wait_times_out_with_a_typed_error(h: Harness, client_db_url: str) -> None:
    with h.client(client_db_url) as client:
        inserted = client.insert(Step("never worked"))
        with pytest.raises(WaitTimeoutError) as timed_out:
            client.wait_job(inserted.job.id, timeout=0.05)
    assert timed_out.value.job is not None and timed_out.value.job.state is JobState.AVAILABLE


def test_waiting_on_a_workflow_that_does_not_exist_is_refused(h: Harness, client_db_url: str) -> None:
    with h.client(client_db_url) as client, pytest.raises(JobNotFoundError, match="wf-nowhere has no tasks"):
        client.wait_workflow("wf-nowhere", timeout=WAIT)


def test_leader_sweep_promotes_after_a_go_style_completion(h: Harness, client_db_url: str) -> None:
    """A dep completed by a plain UPDATE (as a Go client's completer writes it, no promotion of
    ours): without the python line (this fixture's database), River's leader, a Python client
    here, sweeps, and the dependent runs (with the line: test_workflow_sweeper.py)."""
    order: list[str] = []
    lock = threading.Lock()
    wf = Workflow(name="go")
    wf.add("go_part", Step("go_part"), opts=InsertOpts(queue="go_only"))
    wf.add("after", Step("after"), deps=["go_part"])
    client = leader_client(h, client_db_url, _recorder(h, order, lock))
    with client:
        inserted = client.insert_workflow(wf)
        go_id = inserted.job("go_part").id
        complete_as_go(client_db_url, go_id)
        after = client.wait_job(inserted.job("after"), timeout=WAIT)
    assert after.state is JobState.COMPLETED and order == ["after"]
    assert row(client_db_url, go_id).state is JobState.COMPLETED


def test_insert_workflow_in_a_rolled_back_transaction_leaves_nothing(h: Harness, client_db_url: str) -> None:
    wf = Workflow(name="tx")
    _album(wf)
    with h.client(client_db_url) as client:
        with pytest.raises(RuntimeError, match="roll back"), h.transaction(client) as tx:
            client.insert_workflow(wf, tx=tx)
            raise RuntimeError("roll back")
        assert not client.jobs.list().jobs


def test_workflow_wait_is_shared_and_wakes_on_own_completions(h: Harness, client_db_url: str) -> None:
    """Several waits at once in one process: each returns its own job's final row."""
    order: list[str] = []
    lock = threading.Lock()
    client = fast_client(h, client_db_url, _recorder(h, order, lock))
    with client:
        ids = [client.insert(Step(f"j{i}")).job.id for i in range(5)]
        rows = [client.wait_job(i, timeout=WAIT) for i in ids]
    assert [r.id for r in rows] == ids and {r.state for r in rows} == {JobState.COMPLETED}
    assert wait_until(lambda: len(order) == 5, "five jobs worked")


@dataclasses.dataclass
class Calc:
    kind: ClassVar[str] = "wf_calc"
    op: str = ""
    n: int = 0


def _calc_workers(h: Harness) -> Any:
    """part: outputs n; sum: adds its deps' outputs; report: reads 'sum' by name; plan: grows the
    workflow by n parts and a sum over them, all after itself."""
    def work(ctx: Any, args: Calc) -> None:
        flow = ctx.workflow
        if args.op == "part":
            ctx.record_output(args.n)
        elif args.op == "sum":
            outputs = h.call(flow.outputs)
            ctx.record_output({"total": sum(outputs.values()), "from": sorted(outputs)})
        elif args.op == "report":
            ctx.record_output({"sum": h.call(flow.output, "sum"), "me": flow.task, "wf": flow.name})
        elif args.op == "plan":
            grow = h.call(flow.extend)
            parts = [grow.add(f"grown_{i}", Calc("part", i), deps=[flow.task]) for i in range(args.n)]
            grow.add("grown_sum", Calc("sum"), deps=parts)
            h.call(ctx.client.insert_workflow, grow)

    return h.workers(work, Calc, threaded=True)


def test_fan_in_reads_every_dep_output_and_a_task_reads_one_by_name(h: Harness, client_db_url: str) -> None:
    wf = Workflow(name="chord")
    parts = [wf.add(f"part_{i}", Calc("part", i)) for i in range(4)]
    total = wf.add("sum", Calc("sum"), deps=parts)
    wf.add("report", Calc("report"), deps=[total])
    client = fast_client(h, client_db_url, _calc_workers(h))
    with client:
        inserted = client.insert_workflow(wf)
        report = client.wait_job(inserted.job("report"), timeout=WAIT)
    expected = {"total": 6, "from": ["part_0", "part_1", "part_2", "part_3"]}
    assert report.metadata["output"] == {"sum": expected, "me": "report", "wf": "chord"}


def test_a_running_task_grows_its_workflow(h: Harness, client_db_url: str) -> None:
    wf = Workflow(name="grow")
    wf.add("plan", Calc("plan", 3))
    client = fast_client(h, client_db_url, _calc_workers(h))
    with client:
        inserted = client.insert_workflow(wf)
        client.wait_job(inserted.job("plan"), timeout=WAIT)
        rows = client.wait_workflow(inserted.id, timeout=WAIT)
    by_task = {r.metadata[TASK]: r for r in rows}
    assert set(by_task) == {"plan", "grown_0", "grown_1", "grown_2", "grown_sum"}
    assert by_task["grown_sum"].metadata["output"] == {"total": 3, "from": ["grown_0", "grown_1", "grown_2"]}
    assert by_task["grown_0"].attempted_at >= by_task["plan"].finalized_at


def test_workflow_context_refuses_plain_jobs(h: Harness, client_db_url: str) -> None:
    seen: list[str] = []

    def work(ctx: Any, args: Step) -> None:
        try:
            ctx.workflow  # noqa: B018
        except ValueError as exc:
            seen.append(str(exc))

    client = fast_client(h, client_db_url, h.workers(work, Step))
    with client:
        client.wait_job(client.insert(Step("plain")).job, timeout=WAIT)
    assert len(seen) == 1 and "is not a workflow task" in seen[0]


def test_manage_cancel_retry_list_get(h: Harness, client_db_url: str) -> None:
    """Cancel a workflow whose middle task runs (remote cancel) while its dependents wait; list
    and show it; retry the failed part, which then runs to the end."""
    gate_in, gate_out = threading.Event(), threading.Event()
    order: list[str] = []

    def work(ctx: Any, args: Step) -> None:
        order.append(args.name)
        if args.name == "slow" and not gate_out.is_set():
            gate_in.set()
            while not ctx.cancelled:
                ctx.token.wait(0.01)
            ctx.raise_if_cancelled()

    wf = Workflow(name="managed")
    first = wf.add("first", Step("first"))
    slow = wf.add("slow", Step("slow"), deps=[first], opts=InsertOpts(max_attempts=1))
    wf.add("last", Step("last"), deps=[slow])
    client = fast_client(h, client_db_url, h.workers(work, Step, threaded=True))
    with client:
        inserted = client.insert_workflow(wf)
        assert gate_in.wait(WAIT)
        changed = client.workflows.cancel(inserted.id)
        assert {inserted.job("slow").id, inserted.job("last").id} == {r.id for r in changed}
        with pytest.raises(WorkflowTaskFailedError):
            client.wait_workflow(inserted, timeout=WAIT)
        view = client.workflows.get(inserted.id)
        assert view.name == "managed" and view.tasks["first"].state is JobState.COMPLETED
        assert view.tasks["slow"].state is JobState.CANCELLED
        assert view.tasks["last"].state is JobState.CANCELLED
        assert view.tasks["last"].errors[-1].error == "workflow cancelled"
        (summary,) = client.workflows.list()
        assert (summary.id, summary.state, summary.total) == (inserted.id, "failed", 3)
        gate_out.set()
        retried = client.workflows.retry(inserted.id)
        states = {r.metadata[TASK]: r.state for r in retried}
        assert states == {"slow": JobState.AVAILABLE, "last": JobState.PENDING}
        final = client.wait_workflow(inserted.id, timeout=WAIT)
    assert {j.state for j in final} == {JobState.COMPLETED}
    assert order == ["first", "slow", "slow", "last"]
    with h.client(client_db_url) as other, pytest.raises(JobNotFoundError, match="not found"):
        other.workflows.get("missing")


def test_the_completer_promotes_without_a_leader(h: Harness, client_db_url: str) -> None:
    """No leader, so no sweep: every promotion and cancellation is the completer's own
    (dependents of the tasks it finished, and their dependents in turn)."""
    order: list[str] = []
    lock = threading.Lock()
    wf = Workflow(name="no leader")
    _album(wf)
    failing = Workflow(name="no leader, failing")
    _album(failing, fail_thumb=True)
    client = fast_client(h, client_db_url, _recorder(h, order, lock), leader_election=False)
    with client:
        assert not client.is_leader
        done = client.insert_workflow(wf)
        broken = client.insert_workflow(failing)
        assert {j.state for j in client.wait_workflow(done, timeout=WAIT)} == {JobState.COMPLETED}
        with pytest.raises(WorkflowTaskFailedError) as failed:
            client.wait_workflow(broken, timeout=WAIT)
    assert {j.metadata[TASK]: j.state for j in failed.value.jobs} == {
        "thumb_1": JobState.DISCARDED, "album": JobState.CANCELLED, "email": JobState.CANCELLED}


def test_another_clients_completions_end_a_wait(h: Harness, client_db_url: str) -> None:
    """The waiting client works another queue: the tasks' ends reach it through the database
    (river_py_finished on Postgres, a re-read on SQLite), not through its own completer."""
    order: list[str] = []
    lock = threading.Lock()
    worker = fast_client(h, client_db_url, _recorder(h, order, lock))
    waiter = fast_client(h, client_db_url, _recorder(h, order, lock), queues={"elsewhere": FAST})
    wf = Workflow(name="elsewhere")
    _album(wf)
    with worker, waiter:
        inserted = waiter.insert_workflow(wf)
        email = waiter.wait_job(inserted.job("email"), timeout=WAIT)
    assert email.state is JobState.COMPLETED and email.attempted_by == (worker.client_id,)


# Postgres only: SQLite waits read again on a back-off, nothing is announced (and a skipped
# Postgres-marked test fails the suite under CI).
@pytest.mark.parametrize("client_db_url", ["postgres"], indirect=True)
def test_ends_are_announced_on_postgres(h: Harness, client_db_url: str) -> None:
    import psycopg

    order: list[str] = []
    lock = threading.Lock()
    wf = Workflow(name="announced")
    _album(wf)
    with psycopg.connect(client_db_url, autocommit=True) as listener:
        listener.execute('LISTEN "public.river_py_finished"')
        client = fast_client(h, client_db_url, _recorder(h, order, lock))
        with client:
            inserted = client.insert_workflow(wf)
            client.wait_workflow(inserted, timeout=WAIT)
        heard = {w for note in listener.notifies(timeout=5, stop_after=1) for w in json.loads(note.payload)}
    assert inserted.id in heard
