"""`python -m retrieval`: a shim onto the command line, which lives in cli/prog_retrieval.py (only the faces print)."""

from retrieval.cli import main
from cli.prog_retrieval import main

raise SystemExit(main())
