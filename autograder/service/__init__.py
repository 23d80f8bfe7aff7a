"""A submission service, started by ``python -m autograder serve`` (its students' tokens:
``python -m autograder tokens``; both in cli.py).

Students submit a notebook (from the notebook itself with ``attention_checks.submit``, or on
the web page) and get its score and feedback page within seconds; the instructor sees the
class and exports grades for the LMS. See docs/instructors/service.md.
"""
