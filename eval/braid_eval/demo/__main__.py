"""``python3 -m braid_eval.demo``: the demo (see :mod:`braid_eval.demo.run`)."""

import sys

from braid_eval.demo.run import main

sys.exit(main())
