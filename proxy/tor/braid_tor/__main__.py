import sys

from braid_tor.cli import main

sys.exit(main())
