"""The nbgrader integration: the course nbgrader grades in, and the pipeline's steps."""
