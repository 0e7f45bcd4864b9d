"""`python -m cli ...`: `mre` from a checkout, without installing it."""

from .main import main

raise SystemExit(main())
