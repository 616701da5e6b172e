"""The command line: ``python -m dpmix_core SUBCOMMAND``. argparse lives only in this package."""
