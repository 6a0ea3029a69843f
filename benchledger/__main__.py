"""``python -m benchledger ...``: the same as the ``benchledger`` script."""

import sys

from benchledger.cli import main

sys.exit(main())
