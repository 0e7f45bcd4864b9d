"""`python -m chat`: a shim onto the command line, which lives in cli/prog_chat.py (only the faces print)."""

from cli.prog_chat import main

raise SystemExit(main())
