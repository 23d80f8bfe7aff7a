"""The course's grading tool: `python -m autograder {release,grade,...} ...`.

One module per concern, composed by the CLI (tests/test_submissions.py checks that this
map lists every module):

- ``__main__``      ``python -m autograder``: runs ``cli.main``
- ``cli``           the command line: ``grade``, ``release`` and the other subcommands
- ``course``        a throwaway nbgrader course directory (nbgrader does the real work); its pipelines
- ``release``       solutions/ -> exercises/ with nbgrader's generate_assignment
- ``submissions``   finding, unpacking and validating the submitted notebooks (no links followed)
- ``runner``        grading one student's assignment through autograde and feedback, in worker processes
- ``cluster``       grading on a Dask cluster's workers instead (``--scheduler``): each builds its course once
- ``rebuild``       ``RebuildFromSource``: the notebook that runs is the source notebook with the
                    student's answers (and cells they added) put in
- ``sandbox``       the sandboxed kernels and ``SandboxedExecute``, the preprocessor that runs the notebook
- ``forkserver``    the warm Python inside a sandbox that forks each kernel
- ``scanner``       reading the student's source for forbidden calls and tampering, outside the kernel
- ``judge``         ``JudgeTests``, the preprocessor that judges each test cell's records in the grader
- ``exporters``     nbconvert exporters that validate only after the kernel ran
- ``feedback``      the feedback page: its exporter, ``HideHiddenTests`` and ``SanitizeStudentContent``,
                    which cleans what the student controls in it
- ``results``       per-test results and the status of a graded notebook (the points come from the
                    gradebook, where ``judge`` put them)
- ``report``        grades.csv, results.json and the feedback folder
- ``cache``         ``--cache``: a student's assignment whose inputs did not change comes back from
                    an earlier run's results instead of being graded again
- ``gradebook``     writing the results into an instructor's own nbgrader gradebook
- ``lms``           from an LMS bulk download to nbgrader's layout, and grades back to the LMS
- ``similarity``    ``similarity``: pairwise similarity of the students' own code, an offline HTML report
- ``publish``       ``publish DIR``: the student distribution (no model solution, no hidden test) and its wheel
- ``service``       ``serve`` and ``tokens``: the submission service (web pages, API, queue, policies)
"""
import sys

# jsonschema (which nbformat validates with) imports rfc3987_syntax whenever it is installed, and
# that module builds some 35 Earley parsers as it is imported: 2.5 s in every grading process, for
# the IRI formats of JSON Schema, which no notebook schema uses (python-jsonschema/jsonschema#1428).
# A module that is None in sys.modules is one Python cannot import: jsonschema then leaves out
# those two formats, as it does wherever the package is not installed.
sys.modules.setdefault("rfc3987_syntax", None)
