"""Checks used by the test cells of the course's exercise notebooks.

`core` holds the shared machinery; each assignment has a sibling module
(`qkv` for 03-qkv) that only knows its functions, cases and typical mistakes.
"""

from .core import TOLERANCES, CheckFailed, PartialCredit, pick_device

__all__ = ["TOLERANCES", "CheckFailed", "PartialCredit", "pick_device"]
