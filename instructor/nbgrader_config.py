"""nbgrader configuration that makes an instructor's own nbgrader grade as this course's grader does.

Stock nbgrader runs a student's notebook as it was submitted and scores a test cell by whether it
raised: a notebook that only rebinds the `check_*` names gets full marks, and
`nbgrader generate_feedback` shows the hidden tests to every student. With this file,
`nbgrader autograde` and `nbgrader generate_feedback` (from the command line or formgrader) use
the pipelines of `python -m autograder grade` (autograder.grading.course.grading_config):

- each submission is rebuilt on the source notebook (test cells, setup cell and metadata are the
  course's; only the solution cells are the student's);
- it runs in a bubblewrap sandbox (no network, no access to the course's files, memory, time and
  process limits) where the checks only record what the student's code returned;
- the verdicts are computed outside the kernel, against references the kernel never sees;
- the feedback pages show no hidden test.

Use it from the nbgrader course folder (the folder with source/, submitted/, gradebook.db):
copy this file there as nbgrader_config.py, or add to that folder's nbgrader_config.py

    load_subconfig("/path/to/this/repository/instructor/nbgrader_config.py")

The Python that runs nbgrader (and formgrader's notebook server) needs this repository installed
(`pip install --no-deps --editable /path/to/this/repository`) and `bwrap` on PATH. Run nbgrader
with TRAITLETS_APPLICATION_RAISE_CONFIG_FILE_ERROR=1 in its environment: without it, nbgrader only
logs a config file that fails to load (say, autograder not importable) and grades with its unsafe
defaults. See docs/instructors/grading.md.
"""
import os
from pathlib import Path

from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import AssignLatePenalties

from autograder.grading.course import grading_config
from autograder.sandbox.bwrap import bwrap_available

if not bwrap_available():
    raise RuntimeError("this course's nbgrader configuration runs student code in a bubblewrap sandbox, but "
                       "`bwrap` (or `prlimit`) is not installed: apt-get install bubblewrap")

c = get_config()  # noqa: F821 (defined by the loader of nbgrader's config files)
# nbgrader's apps run in the course folder (where they find nbgrader_config.py), unless it is set here.
course_root = Path(c.CourseDirectory.root if "root" in c.CourseDirectory else os.getcwd()).resolve()
c.merge(grading_config(course_root))
# A real course has due dates: nbgrader's late penalties apply, after the scores are saved, as by default
# (the course's own grader leaves them out: its throwaway courses have none).
c.Autograde.autograde_preprocessors = [*c.Autograde.autograde_preprocessors, AssignLatePenalties]
# nbgrader copies the files beside a submitted notebook into the folder its kernel runs in; the
# course's grader copies the notebook alone. Files Python or IPython would run or import there
# (modules, a package that shadows attention_checks, sitecustomize, .ipython/ startup files,
# ~/.local site-packages: the sandbox's home is that folder) are left behind.
c.CourseDirectory.ignore = [*CourseDirectory.ignore.default(), "*.py", "*.pyc", "*.pyo", "*.pyd", "*.so", "*.pth", ".*"]
