"""`python -m cli ...`: `mre` from a checkout, without installing it."""

from cli.main import main

raise SystemExit(main())
