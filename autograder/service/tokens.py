"""``python -m autograder tokens``: the people a roster names, checked before any token is
issued, and the file of their new tokens, which is private from the moment it exists.

One id for two people would give them one account (each would read the other's submissions):
``lms.read_roster`` refuses a roster that repeats one, and an instructor's id that is also a
student's is refused here. A name or id longer than its database column would be refused by
PostgreSQL halfway (SQLite would keep it): refused here, naming the rows, before anything is
written.
"""
from __future__ import annotations

import os
from pathlib import Path

from autograder.errors import InputError
from autograder.report import NAMES_AS_ON_DISK, csv_text

from .db import INSTRUCTOR, STUDENT, Person

HEADER = ["student_id", "role", "name", "email", "token"]
CHECKED_FIELDS = ("id", "name", "email", "lms_id")  # what a roster fills in, each a column of its own length


def people_named(roster: list, roster_path: Path | None, instructors: list[str]) -> list[Person]:
    """The roster's students (``lms.Student``) and the instructors given by id, as the service's
    people; an id named twice, or a value longer than its column, is an InputError naming them."""
    people = [Person(id=s.student_id, role=STUDENT, name=s.name, email=s.email, lms_id=s.lms_id) for s in roster]
    people += [Person(id=i, role=INSTRUCTOR, name=i, email="", lms_id="") for i in dict.fromkeys(instructors)]
    problems = _instructors_on_roster(people) + _too_long(people)
    if problems:
        raise InputError(f"{roster_path or 'the people named'}: " + "; ".join(problems) +
                         ". Nothing was written: correct the roster and run tokens again")
    return people


def _where(number: int, person: Person) -> str:
    """Where the roster names ``person``: its ``number``-th student, with what else it says."""
    if person.role == INSTRUCTOR:
        return f"--instructor {person.id}"
    said = ", ".join(filter(None, (_shown(person.id), person.name, person.email)))
    return f"the roster's student {number} ({said})"


def _shown(value: str, width: int = 40) -> str:
    return value if len(value) <= width else value[:width] + "..."


def _instructors_on_roster(people: list[Person]) -> list[str]:
    students = {person.id: number for number, person in enumerate(people, 1) if person.role == STUDENT}
    return [f"--instructor {person.id} is also {_where(students[person.id], people[students[person.id] - 1])} "
            "(one account for two people)" for person in people
            if person.role == INSTRUCTOR and person.id in students]


def _too_long(people: list[Person]) -> list[str]:
    problems = []
    for number, person in enumerate(people, 1):
        for field in CHECKED_FIELDS:
            value, limit = getattr(person, field) or "", Person.__table__.c[field].type.length
            if len(value) > limit:
                problems.append(f"{_where(number, person)}: its {field} is {len(value)} characters, over the "
                                f"{limit} the database keeps")
    return problems


class PrivateFile:
    """The tokens' file, written whole or not at all: a temporary file beside it, created readable
    by its owner only (``os.open`` with mode 0600: never readable by others, even for a moment),
    opened before the tokens are issued (a folder that cannot take it stops the command before
    the database is changed), renamed over ``path`` once written."""

    def __init__(self, path: Path):
        self.path, self.tmp = path, path.with_name(f".{path.name}.tmp")
        self.tmp.unlink(missing_ok=True)  # left by a run that was killed
        self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)

    def write(self, people: list[Person], issued: dict[str, str]) -> None:
        rows = [[p.id, p.role, p.name, p.email, issued[p.id]] for p in people if p.id in issued]
        with open(self.fd, "w", encoding="utf-8-sig", errors=NAMES_AS_ON_DISK, newline="") as file:
            file.write(csv_text(HEADER, rows))
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        os.close(self.fd)
        self.tmp.unlink(missing_ok=True)
