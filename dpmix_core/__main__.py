import sys

from dpmix_core.cli.main import main

sys.exit(main())
