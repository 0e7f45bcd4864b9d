"""`python -m control`: a shim onto the command line, which lives in cli/prog_control.py (only the faces print)."""

from cli.prog_control import main

raise SystemExit(main())
