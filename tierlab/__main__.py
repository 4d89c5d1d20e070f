"""`python -m tierlab ...`: the command line (tierlab.cli)."""
import sys

from .cli import main

sys.exit(main())
