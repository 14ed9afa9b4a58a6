"""`python -m compiler ...`: see compiler/cli.py."""

import sys

from compiler.cli import main

sys.exit(main())
