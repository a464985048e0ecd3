"""`python -m graphkernel ...` is the `graphkernel` command."""
import sys

from graphkernel.tools.cli import main

sys.exit(main())
