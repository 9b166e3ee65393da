"""``python3 -m braid_wf``: the WF command line (see :mod:`braid_wf.cli`)."""

import sys

from braid_wf.cli import main

sys.exit(main())
