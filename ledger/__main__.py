"""`python -m ledger`: a shim onto the command line, which lives in cli/prog_ledger.py (only the faces print)."""

from cli.prog_ledger import main

raise SystemExit(main())
