"""Per-assignment policies, from a small YAML file (``serve --policies FILE``)::

    default:                    # for every assignment not named below
      attempts_per_day: 10
    assignments:
      01-self-attention:
        deadline: 2026-12-01T23:59:00+01:00
        late: accept            # accept (flagged late) or refuse
        attempts_per_day: 5     # per student, per UTC day; 0: no limit
        before_deadline: score  # score: only the score until the deadline; feedback: everything at once

An assignment without a deadline never shows ``score`` only: its feedback comes at once.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path

import yaml

LATE = ("accept", "refuse")
BEFORE_DEADLINE = ("feedback", "score")


class PolicyError(ValueError):
    pass


@dataclass(frozen=True)
class Policy:
    deadline: datetime | None = None
    late: str = "accept"
    attempts_per_day: int = 0
    before_deadline: str = "feedback"

    def is_late(self, moment: datetime) -> bool:
        return self.deadline is not None and moment > self.deadline

    def shows_feedback(self, moment: datetime) -> bool:
        """Whether a student sees the per-test results and feedback page now (else the score only)."""
        return self.before_deadline == "feedback" or self.deadline is None or moment > self.deadline


def _policy(base: Policy, values: dict, where: str) -> Policy:
    if not isinstance(values, dict):
        raise PolicyError(f"{where}: expected a mapping of settings, got {values!r}")
    unknown = set(values) - {f.name for f in fields(Policy)}
    if unknown:
        raise PolicyError(f"{where}: unknown setting {', '.join(sorted(unknown))} "
                          f"(known: {', '.join(f.name for f in fields(Policy))})")
    policy = replace(base, **values)
    deadline = policy.deadline
    if isinstance(deadline, str):
        try:
            deadline = datetime.fromisoformat(deadline)
        except ValueError as err:
            raise PolicyError(f"{where}: deadline {deadline!r} is not an ISO date and time") from err
    if deadline is not None and not isinstance(deadline, datetime):
        raise PolicyError(f"{where}: deadline {deadline!r} needs a time too, e.g. 2026-12-01T23:59:00+01:00")
    if deadline is not None and deadline.tzinfo is None:
        raise PolicyError(f"{where}: deadline {deadline.isoformat()} needs a time zone, e.g. +00:00")
    if policy.late not in LATE:
        raise PolicyError(f"{where}: late must be one of {', '.join(LATE)}, not {policy.late!r}")
    if policy.before_deadline not in BEFORE_DEADLINE:
        raise PolicyError(f"{where}: before_deadline must be one of {', '.join(BEFORE_DEADLINE)}, "
                          f"not {policy.before_deadline!r}")
    if not isinstance(policy.attempts_per_day, int) or policy.attempts_per_day < 0:
        raise PolicyError(f"{where}: attempts_per_day must be a whole number >= 0, not {policy.attempts_per_day!r}")
    return replace(policy, deadline=deadline.astimezone(timezone.utc) if deadline else None)


class Policies:
    def __init__(self, default: Policy, per_assignment: dict[str, Policy]):
        self.default, self.per_assignment = default, per_assignment

    def __getitem__(self, assignment: str) -> Policy:
        return self.per_assignment.get(assignment, self.default)

    @classmethod
    def load(cls, path: Path | None, assignments: list[str]) -> "Policies":
        if path is None:
            return cls(Policy(), {})
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as err:
            raise PolicyError(f"cannot read the policies {path}: {err}") from err
        if not isinstance(data, dict) or set(data) - {"default", "assignments"}:
            raise PolicyError(f"{path}: expected the keys 'default' and 'assignments'")
        default = _policy(Policy(), data.get("default") or {}, f"{path}: default")
        per_assignment = {}
        for assignment, values in (data.get("assignments") or {}).items():
            if assignment not in assignments:
                raise PolicyError(f"{path}: unknown assignment {assignment!r} (known: {', '.join(assignments)})")
            per_assignment[assignment] = _policy(default, values or {}, f"{path}: {assignment}")
        return cls(default, per_assignment)
