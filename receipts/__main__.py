"""`python -m receipts`: a shim onto the command line, which lives in cli/prog_receipts.py (only the faces print)."""

from cli.prog_receipts import main

raise SystemExit(main())
