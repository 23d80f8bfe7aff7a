"""What the command line reports as "autograder: error: ..." and exits 2 for: something the
instructor gave (a folder, an archive, a roster, a gradebook, a results folder) cannot be
used as given, or the course itself is broken, so nothing could be done. Each stage raises
its own kind. Light: the command line catches them before it loads nbgrader and PyTorch."""


class InputError(RuntimeError):
    """An input of the instructor's cannot be used as given."""


class CourseError(RuntimeError):
    """The course itself is broken (not a student's fault): grading cannot run."""
