"""What the book computes at build time from code that students never get.

The chapters teach functions that the exercises grade (rotary positions, sampling, beam search,
greedy decoding, ...). Their models need working versions of those functions, so the models are
trained, and the experiments that need them are run, here, by ``python -m coursebuild.models``;
the results go into book/data/ as data files (weights of PyTorch's own layers, tensors, numbers
and texts), which the pages load. `python -m autograder publish` copies book/ but not this
package (its allow-list, COPIED in autograder/instructor/publish.py), so no published module
or page holds an implementation of a graded name.

- ``models``: the command; each data file is rebuilt only when the hash of the code and data it
  comes from changed (``store``).
- ``reversal``: chapter 08's reversal Transformer (09 reuses it).
- ``chargpt``: chapter 10's character language models, and its experiments.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOOK = REPO / "book"
# The book's modules (transformer, learning, generation, plots) import one another by their
# plain names, as the pages do, from book/.
if str(BOOK) not in sys.path:
    sys.path.insert(0, str(BOOK))
