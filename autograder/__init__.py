"""The course's grading tool: `python -m autograder {release,grade,...} ...`.

Wings by stage, each a folder, each importing only the wings below it (and each wing's modules
in layers of their own: pyproject.toml's import-linter contracts, tests/test_architecture.py;
tests/test_submissions.py checks that this map lists every module). From the top:

- ``__main__``                ``python -m autograder``: runs ``cli.main``
- ``cli``                     the command line: every subcommand's arguments and handler; builds
                              the ``GradingOptions`` once
- ``service``                 ``serve``: the submission service (web pages, API, database queue, policies)

the instructor's side (``instructor/``)

- ``instructor.publish``      ``publish DIR``: the student distribution (no model solution, no hidden
                              test) and its wheel (``instructor/student/``: its README, Makefile, ...)
- ``instructor.functional``   publish's functional scan: every function and class students get, tried as
                              each graded name on its hidden cases, in bubblewrap
- ``instructor.similarity``   pairwise similarity of the students' own code, an offline HTML report
- ``instructor.class_report`` ``report RESULTS``: the class's mistakes (scores, failure rates, diagnosed
                              mistakes ranked, crashes), an offline HTML page (``instructor/templates/``)
                              and CSVs
- ``instructor.gradebook``    writing the results into an instructor's own nbgrader gradebook
- ``instructor.lms``          from an LMS bulk download to nbgrader's layout, and grades and feedback
                              back to the LMS: one class per LMS
- ``instructor.verdicts``     a test's message read back: the graded name, its hints, the exceptions
- ``instructor.pages``        the Jinja2 environment of the instructor's offline pages (``instructor/templates/``)

the engine (``engine/``)

- ``engine.cache``            ``--cache``: a student's assignment whose inputs did not change comes
                              back from an earlier run's results instead of being graded again
- ``engine.cluster``          grading on a Dask cluster's workers instead (``--scheduler``)
- ``engine.runner``           grading one student's assignment through autograde and feedback, in
                              worker processes
- ``engine.process``          what every grading process sets up: PATH, warnings, the kernels' environment

the nbgrader integration (``grading/``)

- ``grading.release``         solutions/ -> exercises/ with nbgrader's generate_assignment
- ``grading.course_cache``    a generated course kept for the next run with the same assignments
- ``grading.course``          a throwaway nbgrader course directory (nbgrader does the real work); its
                              pipelines
- ``grading.judge``           ``JudgeTests``: each test cell's verdict on its records, as data;
                              ``SaveVerdicts``: the gradebook's scores from it
- ``grading.feedback``        the feedback page: its exporter and template (``grading/templates/``),
                              ``HideHiddenTests`` and ``SanitizeStudentContent``
- ``grading.rebuild``         ``RebuildFromSource``: the notebook that runs is the source notebook with
                              the student's answers (and cells they added) put in
- ``grading.scanner``         reading the student's source for forbidden calls and tampering, outside
                              the kernel
- ``grading.exporters``       nbconvert exporters that validate only after the kernel ran
- ``grading.steps``           the pipeline's steps that run where notebooks are graded, by name: the
                              process that only hands out notebooks never loads PyTorch

the sandbox (``sandbox/``)

- ``sandbox.kernels``         the kernel managers of the sandboxed kernels (their settings, what their
                              fork server sees of them), and ``SandboxedExecute``, the preprocessor
                              that runs the notebook in them
- ``sandbox.provisioners``    how a kernel starts (jupyter_client's kernel provisioners): forked from
                              a warm Python in bubblewrap, started cold there, or without the sandbox
- ``sandbox.registration``    the names they are registered by, and whether this Python has them (light)
- ``sandbox.server``          the fork server a worker's kernels come from: started, asked, reset,
                              stopped (light: ``grade`` starts one before it loads PyTorch)
- ``sandbox.bwrap``           the bubblewrap command, its limits, the folders a sandbox writes to,
                              the uid it runs as
- ``sandbox.cgroups``         one memory limit for all of a sandbox's processes: a memory control group
- ``sandbox.forkserver``      the warm Python inside a sandbox that forks each kernel

what every wing uses

- ``report``                  grades.csv, results.json and the feedback folder
- ``submissions``             finding, unpacking and validating the submitted notebooks (no links followed)
- ``options``                 ``GradingOptions``: how notebooks are graded, the one form options take
                              below the CLI
- ``layout``                  where the course's files are (solutions/, exercises/), which assignments
                              a source folder holds
- ``results``                 a graded notebook's result and ``Status``, per-test results, a test
                              cell's verdict (``CellVerdict``)
- ``cells``                   what a notebook's cell is, from its nbgrader metadata
- ``errors``                  ``InputError``: an input of the instructor's that cannot be used, and
                              ``CourseError``: a course that cannot be graded (exit 2)
"""
import sys

# jsonschema (which nbformat validates with) imports rfc3987_syntax whenever it is installed, and
# that module builds some 35 Earley parsers as it is imported: 2.5 s in every grading process, for
# the IRI formats of JSON Schema, which no notebook schema uses (python-jsonschema/jsonschema#1428).
# A module that is None in sys.modules is one Python cannot import: jsonschema then leaves out
# those two formats, as it does wherever the package is not installed.
sys.modules.setdefault("rfc3987_syntax", None)
