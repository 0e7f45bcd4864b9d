"""`python -m bundle`: a shim onto the command line, which lives in cli/prog_bundle.py (only the faces print)."""

from cli.prog_bundle import main

raise SystemExit(main())
