"""`python -m tierlab.sweep SPEC --out DIR ...` (the same as `python -m tierlab sweep`)."""
import sys

from tierlab.sweep.cli import main

sys.exit(main())
