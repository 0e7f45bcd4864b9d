"""The file backend behind receipts.stores.ReceiptBackend: DATA_DIR's receipt files, Merkle folders and
checkpoint.json, through the functions that write them (storage.files.receipts.files, receipts.checkpoints) — same paths,
same bytes, same locks; IndexRows, receipts.stores.ReceiptRows over index.sqlite. `issue` signs and keeps a
checkpoint on any backend.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ledger.event import validate_session_id
from receipts import checkpoints
from receipts.body import RECEIPT_ID_RE, parse_receipt
from receipts.keys import PublicKey, SigningKey, format_public_key
from receipts.stores import (
    IMPORTED,
    MerkleTree,
    Origin,
    PendingCites,
    ReceiptNotFound,
    TreeSource,
    cited_seqs,
    row_values,
)
from storage.common.checkpoint_issue import issue
from storage.common.fsmode import fsync_dir, open_private, private_dir, write_private
from storage.files.receipts import checkpoint_files as checkpoints_files
from storage.files.receipts import files

if TYPE_CHECKING:
    from storage.contract import LedgerStore, Stores

log = logging.getLogger("chat")  # the engine's: these lines were the engine's before the rows were the store's


RECEIPT_TEMP_PREFIX = ".rcpt_"  # receipts.files.write_receipt's `.<id>.tmp`, write_durable's `.<id>.json.tmp`


class FileBackend:
    """Receipts, trees and checkpoints as files under one data directory (the embedded default)."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)

    def __repr__(self) -> str:
        return f"FileBackend({str(self.data_dir)!r})"

    @contextmanager
    def turn_lock(self, session: str) -> Iterator[None]:
        with files.session_turn_lock(self.data_dir, session):
            yield

    def synced_tree(self, ledger: TreeSource, session: str) -> MerkleTree:
        return files.synced_tree(self.data_dir, ledger, session)

    def drop_tree(self, session: str) -> None:
        shutil.rmtree(self.data_dir / "merkle" / validate_session_id(session), ignore_errors=True)

    def write_receipt(self, session: str, receipt_id: str, envelope: Mapping[str, Any]) -> str:
        return str(files.write_receipt(self.data_dir, session, receipt_id, dict(envelope)))

    def replace_receipt(self, session: str, receipt_id: str, data: bytes) -> None:
        path = files.receipt_path(self.data_dir, session, receipt_id)
        if not path.is_file():
            raise ReceiptNotFound(f"session {session}: no receipt {receipt_id}")
        from storage.common.fsmode import replace_durable

        replace_durable(path, data)

    def read_receipt(self, session: str, receipt_id: str) -> bytes:
        path = files.receipt_path(self.data_dir, session, receipt_id)
        try:
            return files.read_receipt_bytes(path)
        except FileNotFoundError:
            raise ReceiptNotFound(f"session {session}: no receipt {receipt_id}") from None

    def receipt_ids(self, session: str) -> list[str]:
        return [p.stem for p in files.list_receipts(self.data_dir, session)]

    def delete_receipt(self, session: str, receipt_id: str) -> None:
        files.receipt_path(self.data_dir, session, receipt_id).unlink(missing_ok=True)

    def write_cites(self, session: str, receipt_id: str, question_seq: int, memory_seqs: Sequence[int]) -> None:
        files.write_cites(self.data_dir, session, receipt_id, question_seq, list(memory_seqs))

    def drop_cites(self, session: str, receipt_id: str) -> None:
        files.cites_path(self.data_dir, session, receipt_id).unlink(missing_ok=True)

    def pending_cites(self, session: str) -> list[PendingCites]:
        """The `.cites` records the session holds; one this code cannot read is named in the log and left as it is."""
        out = []
        for path in files.list_cites(self.data_dir, session):
            got = files.read_cites(path)
            if got is None:
                logging.getLogger("control").warning(
                    "%s: not a record of a turn's memories this erasure can read; left as it is", path.name
                )
                continue
            out.append(PendingCites(path.stem, got[0], tuple(got[1])))
        return out

    def issue_checkpoint(
        self, ledger: TreeSource, session: str, key: SigningKey, *, allow_shrink: bool = False, durable: bool = True
    ) -> dict[str, Any]:
        """Sign a checkpoint over the session as the ledger has it now and keep it (storage.common.checkpoint_issue;
        the caller holds turn_lock(session))."""
        return issue(self, ledger, session, key, allow_shrink=allow_shrink, durable=durable)

    def keep_checkpoint(self, session: str, checkpoint: Mapping[str, Any], *, allow_shrink: bool = False, durable: bool = True) -> bool:
        """`durable=False`: the file is fsynced and renamed into place, but its folder is not fsynced, so a power cut
        may keep the previous checkpoint instead (whole); for one a later durable keep replaces (a turn's first)."""
        if not allow_shrink:
            try:
                kept = checkpoints_files.latest(self.data_dir, session)
            except (checkpoints.MalformedCheckpoint, OSError):
                kept = None  # an unreadable one is replaced, as `keep` always did
            if kept is not None and kept["body"]["tree_size"] > checkpoint["body"]["tree_size"]:
                return False
        checkpoints_files.keep(self.data_dir, session, checkpoint, durable=durable)
        return True

    def latest_checkpoint(self, session: str) -> dict[str, Any] | None:
        return checkpoints_files.latest(self.data_dir, session)

    def stored_receipts(self, session: str) -> list[tuple[str, Callable[[], bytes]]]:
        """The receipt files of the session (regular files named by a receipt id; a link is no receipt), by name."""
        validate_session_id(session)  # a path-like id is refused before any file or row is touched
        folder = self.data_dir / "sessions" / session / "receipts"
        if not folder.is_dir():
            return []
        found = sorted(p for p in folder.glob("rcpt_*.json") if RECEIPT_ID_RE.fullmatch(p.stem) and p.is_file() and not p.is_symlink())
        return [(p.name, p.read_bytes) for p in found]

    def proposals(self, ttl: int) -> FileProposals:
        """DATA_DIR/proposals/ (FileProposals)."""
        return FileProposals(self.data_dir, ttl=ttl)

    def forget_session(self, session: str) -> None:
        validate_session_id(session)
        for path in (self.data_dir / "sessions" / session / "receipts", self.data_dir / "merkle" / session):
            shutil.rmtree(path, ignore_errors=True)
        checkpoints_files.checkpoint_path(self.data_dir, session).unlink(missing_ok=True)

    # -- the storage contract (storage.api.ReceiptStore) ---------------------------------------------------------
    def sync_deletes(self, session: str) -> None:
        """Make the receipts deleted so far durable (their folder fsynced) before a certificate says they went."""
        from storage.common.fsmode import fsync_dir

        folder = self.data_dir / "sessions" / validate_session_id(session) / "receipts"
        if folder.is_dir():
            fsync_dir(folder)

    def scrub_temps(self, session: str) -> tuple[str, ...]:
        """Receipt temp files a crash left in the session's receipts folder, overwritten and removed; their names
        (as `receipts/<name>`). Receipts are written under the session's turn lock, which the caller holds: any temp
        file there is an orphan, and one from a turn killed before its rename holds the cited memories' words whole."""
        from storage.common.scrub import scrub_prefixed

        folder = self.data_dir / "sessions" / validate_session_id(session) / "receipts"
        return tuple(f"receipts/{n}" for n in scrub_prefixed(folder, RECEIPT_TEMP_PREFIX, suffix=".tmp"))

    def vacuum(self) -> list[str]:
        """Nothing to do: a receipt file is replaced by rename (PostgreSQL VACUUMs its receipt tables)."""
        return []

    def unlink_lock(self, session: str) -> None:
        """The turn lock's file (receipts.files), once its session is deleted; the caller holds the lock."""
        (self.data_dir / "merkle" / f"{validate_session_id(session)}.lock").unlink(missing_ok=True)



class FileProposals:
    """The consent proposals of chat.consent on files (receipts.stores.ProposalStore; storage.pg.consent.PgProposals
    on PostgreSQL). DATA_DIR/proposals/: `secret`, `<session>.<nonce>.json` (waiting), `….used` / `.cancelled` /
    `.expired` (spent). `ttl`: the tokens' lifetime in seconds (chat.consent.TOKEN_TTL).

    Deleting a session (control.forget.forget_session, Engine.forget, retention) removes its `<session>.*` files."""

    def __init__(self, data_dir: Path, *, ttl: int) -> None:
        self.folder = data_dir / "proposals"
        self.ttl = ttl

    def secret(self) -> bytes:
        """Made whole in a temporary file and linked into place (link fails if the name exists), so processes making it
        together agree on one, and none ever reads a half-written one."""
        path = self.folder / "secret"
        private_dir(self.folder)
        if not path.exists():
            tmp = self.folder / f".secret.{os.getpid()}.{os.urandom(8).hex()}.tmp"
            fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            try:
                os.write(fd, os.urandom(32))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)  # atomic: exactly one maker's bytes become the secret
                fsync_dir(self.folder)
            except FileExistsError:
                pass  # another process made it first: use theirs
            finally:
                tmp.unlink(missing_ok=True)
        raw = path.read_bytes()
        if len(raw) != 32:
            raise ValueError(f"{path}: not a consent secret (expected 32 bytes); remove it to make a new one")
        return raw

    def _find(self, nonce: str, suffix: str) -> Path | None:
        """`<session>.<nonce>.<suffix>` (a session id holds no dot, so the name says whose it is)."""
        found = sorted(self.folder.glob(f"*.{nonce}.{suffix}")) if self.folder.is_dir() else []
        return found[0] if found else None

    def save(self, session: str, nonce: str, pending: dict[str, Any]) -> None:
        private_dir(self.folder)
        tmp = self.folder / f".{nonce}.tmp"
        fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            os.write(fd, json.dumps(pending, sort_keys=True).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, self.folder / f"{session}.{nonce}.json")

    def load(self, nonce: str) -> dict[str, Any] | None:
        path = self._find(nonce, "json")
        if path is None:
            return None
        try:
            obj: dict[str, Any] = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # chat.consent: "token: its proposal cannot be read (…)"
            raise ValueError(str(exc)) from None
        return obj

    def spend(self, nonce: str, how: str) -> bool:
        """Atomically move the waiting proposal to its tombstone; False when it was no longer waiting."""
        path = self._find(nonce, "json")
        if path is None:
            return False
        tomb = path.with_suffix(f".{how}")
        try:
            os.rename(path, tomb)  # the claim: of two spends, exactly one rename finds the file
        except FileNotFoundError:
            return False
        # The question leaves the disk with the proposal: an empty file replaces the tombstone's inode (never
        # truncate it in place: a racing answer that opened the proposal before the rename still reads it whole,
        # then finds it spent, instead of reading an empty file and calling the proposal unreadable).
        empty = self.folder / f".{nonce}.{how}.tmp"
        os.close(open_private(empty, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
        os.replace(empty, tomb)
        return True

    def spent(self, nonce: str) -> str | None:
        for how in ("used", "cancelled", "expired"):
            if self._find(nonce, how) is not None:
                return how
        return None

    def sweep(self, now: float) -> None:
        """Drop proposals and tombstones older than the token lifetime (a spent token is refused as expired then)."""
        if not self.folder.is_dir():
            return
        for path in self.folder.iterdir():
            if path.name == "secret":
                continue
            try:
                if path.stat().st_mtime < now - self.ttl - 60:
                    path.unlink()
            except FileNotFoundError:
                continue

    def forget_session(self, session: str) -> None:
        """`<session>.*`: its waiting proposals (with their questions) and its tombstones."""
        validate_session_id(session)  # a session id holds no glob character and no dot
        if not self.folder.is_dir():
            return
        for path in self.folder.glob(f"{session}.*"):
            path.unlink(missing_ok=True)


ORIGIN = "origin.json"  # DATA_DIR/imported/<LOCAL>/origin.json (docs/FORMAT.md §21)


def read_origin(folder: Path) -> Origin | None:
    try:
        doc = json.loads((folder / ORIGIN).read_text("utf-8"))
        return Origin(**{k: doc[k] for k in Origin.__dataclass_fields__})
    except (OSError, ValueError, KeyError, TypeError):
        return None


class FileImports:
    """The sessions imported from bundles into a data directory (storage/api_faces.py: BundleImports; PostgreSQL's
    is storage.pg.imports.PgImports): each is a data directory of its own, `DATA_DIR/imported/<LOCAL>/`
    (`sessions/<ORIGIN>/…`, `erasures/`, `bundle-keys/`, `index.sqlite`), whose `origin.json` keeps the bundle's
    session id, signer, event count, chain head, the bundle file's sha256 and the verdict."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)
        self.root = self.data_dir / IMPORTED

    def __repr__(self) -> str:
        return f"FileImports({str(self.data_dir)!r})"

    def folder(self, local: str) -> Path:
        return self.root / validate_session_id(local)

    def origins(self) -> list[Origin]:
        out = []
        for p in sorted(self.root.iterdir()) if self.root.is_dir() else []:
            if p.name.startswith(".") or not p.is_dir() or p.is_symlink():
                continue
            o = read_origin(p)
            if o is not None and o.local == p.name:
                out.append(o)
        return out

    @contextmanager
    def open(self, local: str) -> Iterator[Stores]:
        """The imported session's ledger, index, receipts and checkpoint, in its folder (closed after)."""
        from storage.contract import Stores
        from storage.files.ledger.store import Ledger
        from storage.files.retrieval.db import Index
        from storage.files.state import FileSessionState

        folder = self.folder(local)
        led = Ledger(folder)
        idx = Index(folder, led)
        try:
            yield Stores("files", folder, led, idx, FileBackend(folder), IndexRows(idx), state=FileSessionState(folder))
        finally:
            idx.close()
            led.close()

    def keys(self, local: str) -> list[PublicKey]:
        """The keys trusted for an imported session: those its bundle carried (checked at import)."""
        from storage.files.receipts.api import load_trust

        folder = self.folder(local) / "bundle-keys"
        return load_trust(sorted(folder.glob("*.pub"))) if folder.is_dir() else []

    def certificates(self, local: str) -> list[tuple[str, bytes]]:
        """(file name, bytes) of the erasure certificates the imported session's bundle carried."""
        erasures = self.folder(local) / "erasures"
        return [(p.name, p.read_bytes()) for p in sorted(erasures.glob("*.json"))] if erasures.is_dir() else []

    @contextmanager
    def audited(self, local: str) -> Iterator[tuple[Path, None]]:
        """The import's folder, checked as `python -m receipts verify R --data DATA_DIR/imported/<LOCAL>` does."""
        yield self.folder(local), None

    def same_ledger(self, session: str, signer: str, events: int, chain_head: str) -> Origin | None:
        return next((o for o in self.origins() if (o.session, o.signer, o.events, o.chain_head) == (session, signer, events, chain_head)), None)

    def taken(self, local: str) -> bool:
        """An import or a session of this data directory already has the id `local`."""
        return (self.root / local).exists() or (self.data_dir / "sessions" / local).exists()

    def sweep(self) -> list[str]:
        """Nothing: a dead import's staging folder is removed by the next staging (bundle.verify.staged)."""
        return []

    def add(self, folder: Path, origin: Origin, keys: Sequence[PublicKey], staged: LedgerStore) -> tuple[Origin, bool, int]:
        """The verified bundle extracted in `folder` (a staging folder under DATA_DIR/imported/) becomes the import
        `origin` (`staged`, the caller's ledger over `folder`, is not needed: the folder itself moves): origin.json and the keys it carried written in, then renamed into place in one step (a crash leaves
        either nothing or the whole import), then indexed. (origin, False, events indexed)."""
        from storage.files.ledger.store import Ledger
        from storage.files.retrieval.db import Index

        # 0600 in 0700 whatever the umask, like every file the project writes (issue 28 §6; read.py extracted the rest)
        write_private(folder / ORIGIN, (json.dumps({k: getattr(origin, k) for k in Origin.__dataclass_fields__}, indent=1) + "\n").encode("utf-8"))
        kept = private_dir(folder / "bundle-keys")
        for k in keys:  # normalised: one trust-format file per key the bundle carried
            write_private(kept / (k.key_id.replace(":", "-") + ".pub"), format_public_key(k).encode("utf-8"))
        target = self.root / origin.local
        os.rename(folder, target)
        fsync_dir(self.root)
        led = Ledger(target)
        idx = Index(target, led)
        try:
            idx.index_session(origin.session)
            count = led.head(origin.session)[0]
        finally:
            idx.close()
            led.close()
        return origin, False, count


class _Sessions(Protocol):
    def sessions(self) -> list[str]: ...



class _IndexDb(Protocol):
    """What IndexRows needs of retrieval.Index: its write and read connections (index.sqlite), its folder, its ledger
    (whose sessions' receipt files the rows are derived from) and the generation of its file (a new one starts with
    empty derived tables)."""

    data_dir: Path

    @property
    def ledger(self) -> _Sessions: ...

    @property
    def generation(self) -> int: ...

    def write(self) -> AbstractContextManager[files.Sql]: ...

    def read(self) -> AbstractContextManager[files.Sql]: ...


class IndexRows:
    """receipts.stores.ReceiptRows over the file backend's index.sqlite tables (storage.files.receipts.files.RECEIPTS_DDL, which
    the caller has ensured): the same statements chat.engine and chat.citing write through the index today."""

    def __init__(self, index: _IndexDb) -> None:
        self.index = index

    def record_row(self, session: str, receipt_id: str, where: str, body: Mapping[str, Any]) -> None:
        v = row_values(body)
        with self.index.write() as db:
            db.execute(
                "INSERT OR REPLACE INTO receipts (receipt_id, session, issued_at, path, user_seq, assistant_seq, tree_size, root, memories, provider, model)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [receipt_id, session, v["issued_at"], where, v["user_seq"], v["assistant_seq"], v["tree_size"], v["root"], v["memories"], v["provider"], v["model"]],
            )

    def record_cites(self, session: str, receipt_id: str, answer_seq: int, cited: Iterable[int]) -> None:
        validate_session_id(session)  # a path-like id is refused before any file or row is touched
        with self.index.write() as db:
            files.record_cites(db, session, receipt_id, answer_seq, cited)

    def citing_answers(self, session: str, seqs: Collection[int]) -> list[tuple[int, int]]:
        validate_session_id(session)  # a path-like id is refused before any file or row is touched
        with self.index.read() as conn:
            return files.citing_answers(conn, session, seqs)

    def answered(self, session: str, after_seq: int) -> set[int]:
        """The answers after `after_seq` whose turn's cites are recorded."""
        validate_session_id(session)  # a path-like id is refused before any file or row is touched
        with self.index.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT answer_seq FROM receipt_cites WHERE session = ? AND answer_seq > ?", (session, after_seq)
            ).fetchall()
        return {int(r[0]) for r in rows}

    def forget_rows(self, session: str, receipt_ids: Sequence[str] | None = None) -> None:
        validate_session_id(session)  # a path-like id is refused before any file or row is touched
        with self.index.write() as db:
            files.forget_rows(db, session, receipt_ids)

    # -- the storage contract's (storage/api_faces.py: ReceiptRowsFaces), as storage.pg.receipts.PgReceipts answers them --
    def derived_generation(self) -> int | None:
        """The index file's generation: the rows here are derived from the receipt files, and a new file (moved aside,
        replaced) starts with them empty."""
        return self.index.generation

    def restore_derived(self) -> int | None:
        """The receipts and receipt_cites tables are derived from the receipt files: refill them after the index was
        rebuilt (receipt_cites also when the index predates it). A receipt always cites its question: a table of
        receipts without any cited seq was never filled. Returns the generation at which the tables are whole."""
        generation = self.index.generation
        with self.index.read() as conn:
            rows = conn.execute("SELECT EXISTS (SELECT 1 FROM receipts)").fetchone()[0]
            cited = conn.execute("SELECT EXISTS (SELECT 1 FROM receipt_cites)").fetchone()[0]
        if not (rows and cited):
            for session in self.index.ledger.sessions():
                for path in files.list_receipts(self.index.data_dir, session):
                    try:
                        receipt = parse_receipt(files.read_receipt_bytes(path))
                    except (ValueError, OSError) as exc:
                        log.warning("%s: not restored to the receipts table (%s)", path, type(exc).__name__)  # a parse error quotes a field
                        continue
                    if not rows:
                        self._record_row_logged(session, receipt.receipt_id, str(path), receipt.body)
                    if not cited:
                        self.record_cites(session, receipt.receipt_id, *cited_seqs(receipt.signed_body))
        return generation

    def _record_row_logged(self, session: str, receipt_id: str, where: str, body: Mapping[str, Any]) -> None:
        """record_row, a failure logged: the row is derived, the receipt file is the record."""
        try:
            self.record_row(session, receipt_id, where, body)
        except Exception as exc:  # noqa: BLE001 - the row is derived; the file is the record
            log.warning("receipt %s: index row not written (%s); the receipt file is intact", receipt_id, exc)


__all__ = ["ORIGIN", "FileBackend", "FileImports", "FileProposals", "IndexRows", "issue", "read_origin"]
