"""The course's grading tool: `python -m autograder {release,grade} ...`.

One module per concern, composed by the CLI:

- ``course``       a throwaway nbgrader course directory (nbgrader does the real work)
- ``release``      solutions/ -> exercises/ with nbgrader's generate_assignment
- ``submissions``  finding, unpacking and validating the submitted notebooks
- ``runner``       running one student's assignment through autograde and feedback
- ``preprocessors``nbgrader-style preprocessors the pipeline adds (hide hidden tests)
- ``scoring``      per-test results and the status of a graded notebook
- ``report``       grades.csv, results.json and the feedback folder
"""
