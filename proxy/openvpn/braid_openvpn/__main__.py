import sys

from braid_openvpn.cli import main

sys.exit(main())
