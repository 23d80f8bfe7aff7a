"""The steps of the course's nbgrader pipeline that run where notebooks are graded, by name.

The course (``course.grading_config``) names them rather than imports them: traitlets and
nbconvert import them where a notebook is graded. They load PyTorch, so the process that only
prepares the course and hands notebooks to its workers never does (a second or more of every
`grade`'s start). ``WORKER_MODULES``: what a grading worker imports before its first notebook,
by its fork server, once for every worker (``engine.process.worker_context``)."""

JUDGE_TESTS = "autograder.grading.judge.JudgeTests"
SAVE_VERDICTS = "autograder.grading.judge.SaveVerdicts"
SANDBOXED_EXECUTE = "autograder.sandbox.kernels.SandboxedExecute"
SANDBOXED_KERNEL_MANAGER = "autograder.sandbox.kernels.SandboxedKernelManager"

WORKER_MODULES = tuple(sorted({step.rpartition(".")[0] for step in (
    JUDGE_TESTS, SAVE_VERDICTS, SANDBOXED_EXECUTE, SANDBOXED_KERNEL_MANAGER)}))
