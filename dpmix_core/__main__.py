import sys

from dpmix_core.cli import main

sys.exit(main())
