"""`python -m retrieval`: a shim onto the command line, which lives in cli/prog_retrieval.py (only the faces print)."""

from cli.prog_retrieval import main

raise SystemExit(main())
