"""What the command line reports as "autograder: error: ..." and exits 2 for: something the
instructor gave (a folder, an archive, a roster, a gradebook, a results folder) cannot be
used as given, so nothing could be done. Each stage raises its own kind."""


class InputError(RuntimeError):
    """An input of the instructor's cannot be used as given."""
