"""What judges the students' code: references, known mistakes and their hints, verdicts.

Never mounted in a grading kernel (see autograder.sandbox.kernels): under the autograder only the
grader's process imports it. One module per assignment module of ``attention_checks``,
each with an ``ANSWERS`` dict (graded name -> ``judging.Answer``); ``judging`` turns outcomes
into reports.
"""
