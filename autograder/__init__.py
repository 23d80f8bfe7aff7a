"""The course's grading tool: `python -m autograder {release,grade,...} ...`.

One module per concern, in layers: each imports only those below it (pyproject.toml's
import-linter contracts, tests/test_architecture.py; tests/test_submissions.py checks that
this map lists every module). From the top:

- ``__main__``      ``python -m autograder``: runs ``cli.main``
- ``cli``           the command line: every subcommand's arguments and handler; builds the
                    ``GradingOptions`` once
- ``service``       ``serve``: the submission service (web pages, API, database queue, policies)
- ``publish``       ``publish DIR``: the student distribution (no model solution, no hidden test) and its wheel
- ``similarity``    pairwise similarity of the students' own code, an offline HTML report
- ``gradebook``     writing the results into an instructor's own nbgrader gradebook
- ``cache``         ``--cache``: a student's assignment whose inputs did not change comes back from
                    an earlier run's results instead of being graded again
- ``cluster``       grading on a Dask cluster's workers instead (``--scheduler``): each builds its course once
- ``runner``        grading one student's assignment through autograde and feedback, in worker processes
- ``lms``           from an LMS bulk download to nbgrader's layout, and grades back to the LMS
- ``release``       solutions/ -> exercises/ with nbgrader's generate_assignment
- ``process``       what every grading process sets up: PATH, warnings, the kernels' environment
- ``course``        a throwaway nbgrader course directory (nbgrader does the real work); its pipelines
- ``judge``         ``JudgeTests``, the preprocessor that judges each test cell's records in the grader
- ``sandbox``       the sandboxed kernels and ``SandboxedExecute``, the preprocessor that runs the notebook
- ``feedback``      the feedback page: its exporter, ``HideHiddenTests`` and ``SanitizeStudentContent``,
                    which cleans what the student controls in it
- ``scanner``       reading the student's source for forbidden calls and tampering, outside the kernel
- ``forkserver``    the warm Python inside a sandbox that forks each kernel
- ``cgroups``       one memory limit for all of a sandbox's processes: a memory control group
- ``rebuild``       ``RebuildFromSource``: the notebook that runs is the source notebook with the
                    student's answers (and cells they added) put in
- ``exporters``     nbconvert exporters that validate only after the kernel ran
- ``report``        grades.csv, results.json and the feedback folder
- ``results``       a graded notebook's result and ``Status``, per-test results (the points come from
                    the gradebook, where ``judge`` put them)
- ``submissions``   finding, unpacking and validating the submitted notebooks (no links followed)
- ``options``       ``GradingOptions``: how notebooks are graded, the one form options take below the CLI
- ``layout``        where the course's files are (solutions/, exercises/)
- ``errors``        ``InputError``: an input of the instructor's that cannot be used (exit 2)
- ``cells``         what a notebook's cell is, from its nbgrader metadata
"""
import sys

# jsonschema (which nbformat validates with) imports rfc3987_syntax whenever it is installed, and
# that module builds some 35 Earley parsers as it is imported: 2.5 s in every grading process, for
# the IRI formats of JSON Schema, which no notebook schema uses (python-jsonschema/jsonschema#1428).
# A module that is None in sys.modules is one Python cannot import: jsonschema then leaves out
# those two formats, as it does wherever the package is not installed.
sys.modules.setdefault("rfc3987_syntax", None)
