"""What judges the students' code: references, known mistakes and their hints, verdicts.

Never mounted in a grading kernel (see autograder.sandbox.kernels): under the autograder only the
grader's process imports it. One module per assignment module of ``attention_checks``, each
with an ``ANSWERS`` dict (graded name -> ``catalogue.Answer``); ``judging`` turns outcomes into
reports. Students get ``judging``, ``catalogue``, ``localising``, ``hints``, ``crashes``, ``fits`` and
``torch_messages`` only (``python -m autograder publish``: they compute no answer): the
per-assignment modules compute what graded functions return, and stay with the grader; a
student's notebook judges its visible cases from their answers as data (``..published``).

The layers, top to bottom (pyproject.toml's import contracts): the assignments' modules, then
``judging``, then ``catalogue`` and ``crashes``, then ``fits``, ``hints`` and ``torch_messages``.
"""
