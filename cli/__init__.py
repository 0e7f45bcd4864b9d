"""`mre`: the one command line of the Memory Receipt Engine (click), installed by `pip install -e .`.

It parses, calls and prints: every command calls the implementation function the `python -m` program of the same
name calls (cli/prog_ledger.py, prog_receipts.py, prog_retrieval.py, prog_control.py, prog_chat.py, prog_bundle.py;
each package's `__main__.py` is a shim onto one) with the same argparse.Namespace, so both spellings give the same
output and exit codes.

The program is `cli.main:main` (`[project.scripts]`). Nothing is imported here: `python -m ledger` (cli/prog_ledger.py)
imports this package, and should not pay for click and every `mre` group to do so.
"""
