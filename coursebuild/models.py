"""Train the book's models and run the experiments that need them, once: ``python -m coursebuild.models``.

    python -m coursebuild.models           # build what is missing or out of date (make site runs this)
    python -m coursebuild.models --check   # exit 1 if anything is missing or out of date; build nothing

Each result is a data file in book/data/ (documented in book/data/README.md) that holds the hash
of everything it was computed from: the code in its SOURCES, the data files it reads and the
PyTorch version. A file whose hash matches is kept (nothing is trained); any change to that
code or data builds it again. The pages only load these files, so a build of the site never
trains under jupyter-book's time limit for a cell, and chapter 09 reuses chapter 08's model.
Everything trained is seeded and runs on one thread: the same code gives the same numbers.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch
from tqdm import tqdm

from coursebuild import BOOK, REPO, answer_cells, chargpt, reversal

DATA = BOOK / "data"


@dataclass(frozen=True)
class Result:
    """One data file of book/data/, what it is computed from and how."""

    file: str
    what: str
    sources: list[str]  # files, relative to the repository, whose contents decide the result
    steps: int  # for the progress bar
    build: Callable[[Callable[[int], None]], dict]

    def key(self) -> str:
        digest = hashlib.sha256(torch.__version__.encode())
        for name in self.sources:
            digest.update(b"\0" + name.encode() + b"\0" + (REPO / name).read_bytes())
        return digest.hexdigest()[:16]

    def stored_key(self) -> str | None:
        path = DATA / self.file
        if not path.is_file():
            return None
        try:
            return torch.load(path, weights_only=True).get("key")
        except Exception:  # a truncated or foreign file: build it again
            return None


RESULTS = [
    Result("reversal.pt", "chapter 08's reversal Transformer (chapters 08 and 09)", reversal.SOURCES,
           reversal.STEPS, reversal.build),
    Result("chargpt.pt", "chapter 10's four character language models and their experiments", chargpt.SOURCES,
           chargpt.STEPS, chargpt.build),
    *(Result(page.file, f"the experiments of {page.page} that run its answer cells", page.sources, page.steps,
             page.build) for page in answer_cells.PAGES),
]


def write(result: Result, key: str) -> float:
    """Build one result with a progress bar; returns the seconds it took."""
    start = time.perf_counter()
    with tqdm(total=result.steps, desc=result.file, unit="step", file=sys.stderr, dynamic_ncols=True) as bar:
        payload = result.build(bar.update)
    payload["key"] = key
    DATA.mkdir(exist_ok=True)
    partial = DATA / f".{result.file}.{os.getpid()}.tmp"  # another build may write the same file
    torch.save(payload, partial)
    os.replace(partial, DATA / result.file)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only say what is out of date; exit 1 if anything is")
    args = parser.parse_args(argv)
    stale = [(r, r.key()) for r in RESULTS]
    stale = [(r, key) for r, key in stale if r.stored_key() != key]
    for result in RESULTS:
        if result not in [r for r, _ in stale]:
            print(f"book/data/{result.file}: up to date ({result.what})")
    if args.check:
        for result, _ in stale:
            print(f"book/data/{result.file}: missing or out of date ({result.what}); "
                  "run `python -m coursebuild.models`")
        return 1 if stale else 0
    for result, key in stale:
        print(f"book/data/{result.file}: building {result.what}, once (its code or data changed); "
              "a few minutes on one CPU thread", flush=True)
        seconds = write(result, key)
        print(f"book/data/{result.file}: written in {seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
