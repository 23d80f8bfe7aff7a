"""The names the grader's kernel provisioners (provisioners.py) are registered by, as entry points
in pyproject.toml, and whether this Python has them. Light: `grade` checks it before it loads
jupyter_client, which its early start of the sandbox does not wait for."""
from __future__ import annotations

from importlib.metadata import entry_points

# What a kernel spec asks jupyter_client for (the kernel managers of kernels.py name one).
PRIVATE_IPC = "autograder-private-ipc"
SANDBOX = "autograder-sandbox"


def registration_problem() -> str:
    """Why jupyter_client could not find the grader's provisioners in this Python, or ""."""
    registered = {entry.name for entry in entry_points(group="jupyter_client.kernel_provisioners")}
    missing = sorted({PRIVATE_IPC, SANDBOX} - registered)
    if not missing:
        return ""
    return (f"jupyter_client finds no kernel provisioner named {' or '.join(missing)} in this Python, so no "
            "grading kernel could start: install this repository into it, `pip install --no-deps --editable "
            "<the repository>` (make setup does)")
