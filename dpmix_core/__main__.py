"""``python -m dpmix_core COMMAND ...``: run the command (SIGTERM ends it as Ctrl-C does, cleanup included: see
:func:`dpmix_core.cli.main.stop_on_sigterm`), then leave without the interpreter's teardown (see
:func:`dpmix_core.cli.main.exit_without_teardown`)."""

from dpmix_core.cli.main import exit_without_teardown, main, stop_on_sigterm

stop_on_sigterm()
exit_without_teardown(main())
