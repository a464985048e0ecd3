"""`python -m graphkernel ...` is the `graphkernel` command."""
import sys

from graphkernel.cli import main

sys.exit(main())
