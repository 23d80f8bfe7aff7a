from autograder.cli import main
from autograder.engine.process import exit_now

exit_now(main())
