"""`mre receipt`: signed receipts (`python -m receipts verify|show|pubkey|checkpoint|tlog-proof|verify-proof|cosign|verify-note`)."""

from __future__ import annotations

from typing import Any

import click

from cli.calls import run_program
from cli.options import OrderedGroup, data_dir_argument, json_option, session_argument, trust_option

IMPL = "cli.prog_receipts"
VERIFY_PROOF_EPILOG = (
    "Exit status: 0 VERIFIED (signed by a --vkey key, origin, digest and inclusion all check); 1 FAILED; "
    "3 UNVERIFIED (no --vkey); 2 unusable input."
)
VERIFY_EPILOG = (
    "Exit status: 0 VERIFIED; 1 FAILED (a check failed); 3 UNVERIFIED (nothing failed, but something could not be "
    "checked here, e.g. no --trust key); 2 unusable input."
)


@click.group(cls=OrderedGroup)
def receipt() -> None:
    """Signed receipts: verify, show; checkpoints, proofs, witnesses."""


@receipt.command(epilog=VERIFY_EPILOG, short_help="Verify a receipt or certificate, offline or with its ledger.")
@click.argument("receipt", metavar="RECEIPT")
@click.option("--data", metavar="DATA_DIR", help="also check against this data directory's ledger (its own key is never trusted)")
@trust_option("a trusted public key file (repeatable); needed for VERIFIED")
@json_option("the report as JSON: verdict, groups (one sentence each) and every check row")
@click.option("--rows", "--verbose", "rows", is_flag=True, help="also list every raw check row (the table the groups summarise)")
@click.option("--full", is_flag=True, help="re-walk the ledger from genesis, ignoring the audit cache")
@click.option("--policy", metavar="FILE", help="check the witness cosignatures the receipt carries under this tlog-policy (logs, witnesses, quorum)")
def verify(**params: Any) -> int:
    """Verify a receipt (or an erasure certificate) offline, or with its ledger."""
    return run_program(IMPL, "cmd_verify", "verify", params)


@receipt.command(short_help="Print what a receipt says (verifies nothing).")
@click.argument("receipt", metavar="RECEIPT")
@json_option("the summary as JSON (stable keys; full texts)")
def show(**params: Any) -> int:
    """Print what a receipt says: the question, the memories, the answer (verifies nothing)."""
    return run_program(IMPL, "cmd_show", "show", params)


@receipt.command(short_help="Print the data directory's public key (a --trust file).")
@data_dir_argument
@click.option("--vkey", is_flag=True, help="print the C2SP note verifier key line (name+hash+base64 key) instead")
def pubkey(**params: Any) -> int:
    """Print the data directory's existing public key (a --trust file); never creates one."""
    return run_program(IMPL, "cmd_pubkey", "pubkey", params)


@receipt.command(short_help="Print a session's latest signed checkpoint (JSON).")
@data_dir_argument
@session_argument
@click.option("--note", is_flag=True, help="print it as a C2SP signed note (c2sp.org/tlog-checkpoint) instead of JSON")
def checkpoint(**params: Any) -> int:
    """Print a session's latest signed checkpoint (JSON, to publish or keep)."""
    return run_program(IMPL, "cmd_checkpoint", "checkpoint", params)


@receipt.command("tlog-proof", short_help="Print a .tlog-proof of one event a receipt cites.")
@click.argument("receipt", metavar="RECEIPT")
@click.argument("seq", metavar="SEQ")
@click.option("--data", metavar="DATA_DIR", help="the data directory whose key signed the receipt's checkpoint (default: the one the receipt is kept in)")
def tlog_proof(**params: Any) -> int:
    """Print a .tlog-proof (c2sp.org/tlog-proof@v1) of the event at SEQ that RECEIPT cites: its inclusion path and
    the receipt's checkpoint as a signed note."""
    return run_program(IMPL, "cmd_tlog_proof", "tlog-proof", params)


@receipt.command("verify-proof", epilog=VERIFY_PROOF_EPILOG, short_help="Check a .tlog-proof with the event's ledger line.")
@click.argument("proof", metavar="PROOF")
@click.argument("event", metavar="EVENTLINE")
@click.option("--vkey", "vkey", metavar="KEYLINE", multiple=True, help="a trusted note verifier key line (`mre receipt pubkey DATA_DIR --vkey`; repeatable); needed for VERIFIED")
@json_option("the report as JSON: verdict and every check row")
@click.option("--policy", metavar="FILE", help="also check the note's witness cosignatures under this tlog-policy (its log keys are trusted as --vkey keys)")
def verify_proof(**params: Any) -> int:
    """Check a .tlog-proof with the file holding the event's ledger line, under note verifier keys."""
    return run_program(IMPL, "cmd_verify_proof", "verify-proof", params)


@receipt.command(short_help="Ask witnesses to cosign the latest checkpoint.")
@data_dir_argument
@session_argument
@click.option("--policy", required=True, metavar="FILE", help="a tlog-policy file (c2sp.org/tlog-policy): witness keys and URLs, the quorum")
@click.option("--timeout", type=float, default=5.0, metavar="S", help="seconds to wait for each witness (default 5)")
def cosign(**params: Any) -> int:
    """Sign the session's latest checkpoint as a note, ask every witness of the policy to cosign it, and print the note
    with the cosignatures that verify (one line per witness on stderr). Exit 0 when the quorum holds, 1 when not."""
    return run_program("cli.prog_witness", "cmd_cosign", "cosign", params)


@receipt.command("verify-note", epilog=VERIFY_EPILOG, short_help="Check a checkpoint note's cosignatures.")
@click.argument("note", metavar="NOTE")
@click.option("--policy", required=True, metavar="FILE", help="a tlog-policy file: the log keys, the witnesses, the quorum")
@click.option("--receipt", metavar="RECEIPT", help="also check that the note is this receipt's signed checkpoint")
@json_option("the report as JSON: verdict and every check row")
def verify_note(**params: Any) -> int:
    """Check a checkpoint as a signed note with its witness cosignatures under a tlog-policy: a policy log signed it,
    one row per witness, the quorum."""
    return run_program("cli.prog_witness", "cmd_verify_note", "verify-note", params)


@receipt.command(epilog="exit status: 0 replayed, 1 the ranking differs or the receipt does not verify, 2 unusable input, 3 cannot be replayed",
                 short_help="Re-run the search a receipt's ranking commits to.")
@click.argument("receipt", metavar="RECEIPT")
@click.option("--data", required=True, metavar="DATA_DIR", help="the data directory whose ledger the receipt cites")
@click.option("--trust", multiple=True, metavar="PUBKEY", help="a trusted public key file (repeatable); the receipt must verify under one")
@json_option("the replay as JSON: verdict, reasons, differences, both lists, the events left out and why")
def replay(**params: Any) -> int:
    """Rebuild the search as the session stood when the receipt's turn ran (its events below the size the receipt
    names, that time's revocations, supersessions and erasures), re-run the question and compare rank by rank."""
    return run_program("cli.prog_replay", "cmd_replay", "replay", params)
