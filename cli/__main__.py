"""``python -m cli ...``: the same as the ``benchledger`` script."""

import sys

from cli import main

sys.exit(main())
