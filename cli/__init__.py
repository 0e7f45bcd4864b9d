"""`mre`: the one command line of the Memory Receipt Engine (click), installed by `pip install -e .`.

It parses, calls and prints: every command calls the implementation function the `python -m` program of the same
name calls (ledger/__main__.py, receipts/__main__.py, retrieval/cli.py, control/__main__.py, chat/__main__.py,
bundle/__main__.py) with the same argparse.Namespace, so both spellings give the same output and exit codes.
"""

from .main import main, mre

__all__ = ["main", "mre"]
