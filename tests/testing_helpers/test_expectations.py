"""The pure verdicts both drivers' inserted-job assertions share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest

from river_db.testing.builder import build_job
from river_db.testing.expectations import (
    PAGE,
    ExpectedJob,
    expectations_of,
    judge_inserted,
    judge_many_inserted,
    judge_not_inserted,
    list_jobs_page,
    page_after,
)
from river_protocol.args import arg_field
from river_protocol.errors import ValidationError


@dataclass
class Mail:
    kind: ClassVar[str] = "mail"
    to: str = arg_field(json="to")


def test_judge_inserted_returns_the_one_match_decoded() -> None:
    jobs = [build_job(Mail("a"), id=1), build_job(Mail("b"), id=2)]
    found = judge_inserted(ExpectedJob(Mail, args={"to": "b"}), jobs, "postgres")
    assert found.id == 2
    assert found.decoded_args == Mail("b")


def test_judge_inserted_failures_say_why() -> None:
    with pytest.raises(AssertionError, match="no job of kind 'mail' was found"):
        judge_inserted(ExpectedJob("mail"), [], "postgres")
    jobs = [build_job(Mail("a"), id=1), build_job(Mail("b"), id=2)]
    with pytest.raises(AssertionError, match=r"none of the 2 job\(s\) of that kind matches"):
        judge_inserted(ExpectedJob(Mail, queue="other"), jobs, "postgres")
    with pytest.raises(AssertionError, match="exactly one job 'mail', but 2 match"):
        judge_inserted(ExpectedJob(Mail), jobs, "postgres")


def test_judge_not_inserted() -> None:
    jobs = [build_job(Mail("a"), id=1)]
    judge_not_inserted(ExpectedJob(Mail, args={"to": "z"}), jobs, "postgres")
    with pytest.raises(AssertionError, match="expected no job 'mail', but 1 were inserted"):
        judge_not_inserted(ExpectedJob(Mail), jobs, "postgres")


def test_judge_many_inserted_checks_order_and_properties() -> None:
    jobs = [build_job(Mail("a"), id=1), build_job(Mail("b"), id=2)]
    expectations = expectations_of([Mail("a"), ExpectedJob(Mail, args={"to": "b"})])
    assert [j.id for j in judge_many_inserted(expectations, jobs, "postgres")] == [1, 2]
    with pytest.raises(AssertionError, match="expected kinds: \\['mail'\\]"):
        judge_many_inserted(expectations_of(["mail"]), jobs, "postgres")
    with pytest.raises(AssertionError, match=r"\[1\] id=2: args"):
        judge_many_inserted(expectations_of([Mail("a"), Mail("c")]), jobs, "postgres")
    with pytest.raises(ValidationError, match="at least one expected job"):
        expectations_of([])


def test_pages() -> None:
    intent = list_jobs_page(["b", "a", "b"], None)
    assert intent.filter.kinds == ("b", "a")
    assert intent.limit == PAGE
    assert page_after([build_job(Mail("a"), id=3)]) is None
    full = [build_job(Mail("a"), id=i) for i in range(1, PAGE + 1)]
    assert page_after(full) == (PAGE, PAGE)
