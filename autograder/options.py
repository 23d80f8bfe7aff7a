"""How notebooks are graded: one frozen object, built once by the command line (``grade``,
``serve``) and the only form grading options take below it. The course, the grading workers
(local and Dask, which receive it pickled) and the result cache's key all read it."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class GradingOptions:
    source_dir: Path  # the source notebooks (solutions/)
    cell_timeout: int = 60  # seconds; a cell running longer is interrupted
    notebook_timeout: int = 300  # seconds, wall clock, for a whole notebook
    memory_limit: int = 4 * 1024**3  # bytes of address space per grading kernel; 0: none
    sandbox: bool = True  # run kernels in bubblewrap
    warm_kernels: bool = True  # fork kernels from a warm Python instead of starting each
    localise: bool = True  # run a notebook again where its mistakes were not localised (engine.runner)

    def affecting_results(self) -> dict[str, Any]:
        """Every option whose change may change a grade (the cache keys on them): all but the
        source folder, whose notebooks the cache fingerprints themselves."""
        return {name: value for name, value in asdict(self).items() if name != "source_dir"}
