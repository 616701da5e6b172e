"""``python -m dpmix_core COMMAND ...``: run the command, then leave without the interpreter's teardown
(see :func:`dpmix_core.cli.main.exit_without_teardown`)."""

from dpmix_core.cli.main import exit_without_teardown, main

exit_without_teardown(main())
