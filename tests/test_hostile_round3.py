"""Hostile notebooks of the third round (issue 24), graded by the real CLI: each attack beside
its honest twin, as in test_hostile.py; an attack never earns more than its twin.

One graded class per kind of hole (a fixture each, so ``-k`` grades only what it tests):
forged statuses, hidden tests echoed back, PyTorch's private implementations, students who
outlive their kernel, resources shared by everyone, and device bugs a CPU grader must see.
"""
from __future__ import annotations

import html
import re

import nbformat
import pytest

from classroom import secret_lines
from test_hostile import ASSIGNMENT, REFERENCE, SDPA, Attack, HostileClass, code

OPTIONS = ("--cell-timeout", "10", "--notebook-timeout", "60")


def added_cell(source: str):
    """A cell of the student's own, right after the scaled_dot_product_attention cell."""
    def tamper(nb):
        (cell,) = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == SDPA]
        nb["cells"].insert(nb["cells"].index(cell) + 1, nbformat.v4.new_code_cell(code(source)))
        return nb
    return tamper


def graded(tmp_path_factory, name: str, attacks: list[Attack], options=OPTIONS) -> HostileClass:
    return HostileClass(tmp_path_factory.mktemp(name), attacks, options)


def check_attacks(hostile: HostileClass, attack: Attack) -> None:
    row, twin = hostile.row(attack.name), hostile.score(f"twin-{attack.twin}")
    assert row["max_score"] == hostile.row("twin-reference")["max_score"]
    assert row["status"] in ((attack.status,) if isinstance(attack.status, str) else attack.status), row
    if attack.expect == "equal":
        assert hostile.score(attack.name) == twin, row
    else:
        assert hostile.score(attack.name) <= twin, row


def shown_to_student(hostile: HostileClass, student: str) -> str:
    """Everything of a notebook that reaches the student: the feedback page's text, the reason
    and every test's message."""
    page = (hostile.out / "feedback" / student / ASSIGNMENT / "qkv.html").read_text()
    result = hostile.results.notebooks[(student, ASSIGNMENT)]
    return "\n".join([html.unescape(re.sub(r"<[^>]+>", "", page)), result["reason"],
                      *(test["message"] for test in result["tests"])])


# --------------------------------------------------------------------------------------------
# 3. forged statuses: the status is what the grader observed, never a name the kernel printed

STATUS_ATTACKS = [
    # a wrong answer whose every call "times out", by an exception named like the executor's own
    Attack("forged_timeout_by_name", "forges a status", code("""
        class CellTimeoutError(BaseException):
            pass
        def scaled_dot_product_attention(*args, **kwargs):
            raise CellTimeoutError("the cell did not finish in time")"""), expect="at_most"),
    # a right answer that claims its kernel died, with a reason of its own choosing
    Attack("forged_dead_kernel_reason", "forges a status", twin="reference", tamper=added_cell("""
        DeadKernelError = type("DeadKernelError", (Exception,), {})
        raise DeadKernelError("REGRADE-ME-BY-HAND: the grader lost my work")""")),
    # ... and in a test cell's own output, by a class the student's function raises there
    Attack("forged_notebook_timeout_in_test", "forges a status", code("""
        class CellTimeoutError(KeyboardInterrupt):
            pass
        _honest = scaled_dot_product_attention
        def scaled_dot_product_attention(*args, **kwargs):
            raise CellTimeoutError("the notebook ran past its time limit (--notebook-timeout): FORGED")"""),
        expect="at_most"),
]


@pytest.fixture(scope="module")
def statuses(tmp_path_factory):
    return graded(tmp_path_factory, "statuses", STATUS_ATTACKS)


@pytest.mark.parametrize("attack", STATUS_ATTACKS, ids=lambda a: a.name)
def test_forged_status_is_the_students_error(statuses, attack):
    check_attacks(statuses, attack)
    row = statuses.row(attack.name)
    assert "REGRADE-ME" not in row["reason"] and "FORGED" not in row["reason"]
    assert "time limit" not in row["reason"] and "kernel died" not in row["reason"]
