"""Session bundles in the app and over MCP (issue 13; the format and its rules are `bundle`'s, docs/FORMAT.md §21).

No Gradio here. Every entry point takes the visitor's session key, so:
- an export holds the key's own session and nothing else (the session id is derived from the key, never taken
  from the page);
- a bundle is imported under a local id that starts with the importing visitor's session id
  (`<visitor session>-<16 hex of the bundle file's sha256>`): the app lists, searches and verifies against only
  the imported sessions whose local id carries the visitor's own session id, as it consults only the visitor's
  own ledger. (`python -m bundle list DATA_DIR` on the server shows them all.)
- the only key trusted at import is this app's own signing key: a bundle from another server is refused unless
  the visitor asks for it to be imported unverified, and is then recorded as unverified (`Origin.verdict`).

Files go through the per-process download folder (webui.downloads); a refusal is BadInput with one line, the
server's own paths replaced by their role (DATA_DIR, the upload's file name). Every call goes to the engine's
stores (storage.stores: the files in DATA_DIR, or PostgreSQL, where each import is a schema of its own).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundle import (
    BundleError,
    BundleReport,
    Exported,
    Imported,
    ImportRefused,
    Origin,
    export_session,
    import_bundle,
    list_imported,
    render_markdown,
)
from bundle.format import SUFFIX
from bundle.importer import find_receipt_home, open_imported
from chat.stand_ins import StandIns
from control.state import ControlState, derive
from receipts.body import MAX_RECEIPT_BYTES
from retrieval.model import SearchError, SearchResponse
from webui.inputs import BadInput, check_query, parse_k
from webui.sessions import is_session_key, session_id

if TYPE_CHECKING:
    from storage.api import LedgerStore, SearchIndex
    from storage.stores import Stores
    from webui.service import Service

# The app's upload cap is the receipt cap (webui.config.launch_options: Gradio refuses a bigger upload unread);
# a bigger bundle is imported on the server with `python -m bundle import`.
MAX_BUNDLE_UPLOAD_BYTES = MAX_RECEIPT_BYTES
# A bundle travels inside one MCP answer as base64: past this, export it from the app or the CLI.
MAX_MCP_BUNDLE_BYTES = MAX_RECEIPT_BYTES
LOCAL_HASH = 16  # hex digits of the bundle file's sha256 in a local id
CLI_HINT = "import a bigger bundle on the server with `python -m bundle import DATA_DIR FILE`"

Progress = Callable[[int, int, str], None]


def bundle_name(session: str) -> str:
    """The download's file name: it names the session, so forgetting in that session finds and deletes the copy
    (webui.forget.purge_copies)."""
    return f"session-{session}{SUFFIX}"


def markdown_name(session: str) -> str:
    return f"session-{session}.md"


def is_export_copy(name: str, session: str) -> bool:
    """A download copy of `session`'s bundle or Markdown (named by bundle_name / markdown_name)."""
    return name.endswith((bundle_name(session), markdown_name(session)))


def _stores(service: Service) -> Stores | None:
    """The engine's stores (on files its ledger and receipt files in DATA_DIR; on PostgreSQL the database), or None
    for an engine without any (the bundle functions' own file default)."""
    stores: Stores | None = getattr(service.engine, "stores", None)
    return stores


def _settling(service: Service) -> dict[str, Any]:
    """What an export finishes an erasure stopped half way with (control.settle, bundle.export.no_erasure_pending):
    the engine's stores, and the app's download folders, whose stale copies of the redacted receipts go too."""
    return {"recover_with": service.engine.stores, "copies": service.cache_dirs}


def _controls(ledger: LedgerStore, session: str) -> ControlState:
    """An imported session's control state, folded from its events (read-only: nothing cached or written for it)."""
    return derive(ledger.events(session))


def _clean(message: str, service: Service, upload: Path | None = None) -> str:
    """A refusal's text without the server's paths: the data directory as DATA_DIR, an upload by its name."""
    if upload is not None:
        message = message.replace(str(upload), upload.name)
    return message.replace(str(service.data_dir), "DATA_DIR")


# -- export ------------------------------------------------------------------------------------------
def export_bundle(service: Service, key: object, progress: Progress | None = None) -> Exported:
    """The key's own session as a signed bundle in a fresh download folder. Raises SessionKeyError, BadInput."""
    session = service.session(key)
    if not service.engine.ledger.exists(session):
        raise BadInput("export: this session has no events yet: say something first")
    out = service.downloads.reserve(bundle_name(session))
    try:
        return export_session(
            service.data_dir, session, out, key=service.engine.key, progress=progress, stores=_stores(service), **_settling(service)
        )
    except BundleError as exc:
        shutil.rmtree(out.parent, ignore_errors=True)
        raise BadInput(f"export: {_clean(str(exc), service)}") from None


def export_markdown(service: Service, key: object) -> tuple[str, int]:
    """(download path, events covered): the key's own session as readable Markdown. Raises SessionKeyError, BadInput."""
    session = service.session(key)
    if not service.engine.ledger.exists(session):
        raise BadInput("export: this session has no events yet: say something first")
    try:
        text, n = render_markdown(service.data_dir, session, stores=_stores(service), key=service.engine.key, **_settling(service))
    except BundleError as exc:
        raise BadInput(f"export: {_clean(str(exc), service)}") from None
    return service.downloads.put(markdown_name(session), text.encode("utf-8")), n


def export_base64(service: Service, key: object) -> tuple[Exported, str]:
    """For MCP: (what was exported, the bundle as base64); the download copy is removed. Raises BadInput when the
    bundle is over MAX_MCP_BUNDLE_BYTES."""
    done = export_bundle(service, key)
    try:
        if done.bytes > MAX_MCP_BUNDLE_BYTES:
            raise BadInput(
                f"export_session: the bundle is {done.bytes:,} bytes, over the {MAX_MCP_BUNDLE_BYTES:,}-byte limit of "
                "one tool answer; download it from the app's Ledger tab, or run `python -m bundle export` on the server"
            )
        return done, base64.b64encode(done.path.read_bytes()).decode("ascii")
    finally:
        shutil.rmtree(done.path.parent, ignore_errors=True)


# -- import ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImportOutcome:
    """What an import did: `imported` (None when refused), the verification rows (None when the bundle's structure
    was refused before any check could run) and, when refused, why (one line)."""

    imported: Imported | None
    report: BundleReport | None
    refused: str | None = None


def check_bundle_upload(path: object) -> Path:
    """The uploaded file, refusing a missing, empty or oversized one without reading it."""
    if path is None or path == "":
        raise BadInput(f"import: choose a bundle file ({SUFFIX}) first")
    if not isinstance(path, (str, os.PathLike)):
        raise BadInput("import: expected one file")
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError:
        raise BadInput("import: the uploaded file is no longer available; upload it again") from None
    if size > MAX_BUNDLE_UPLOAD_BYTES:
        raise BadInput(f"import: {size:,} bytes is over this app's {MAX_BUNDLE_UPLOAD_BYTES:,}-byte upload limit; {CLI_HINT}")
    if size == 0:
        raise BadInput("import: the file is empty")
    return p


def local_id(session: str, bundle_sha256: str) -> str:
    """The local id an import by `session` gets: it carries the importer's session id (which imports are whose)."""
    return f"{session}-{bundle_sha256[:LOCAL_HASH]}"


def owns(session: str, origin: Origin) -> bool:
    return origin.local.startswith(f"{session}-") and len(origin.local) == len(local_id(session, "0" * LOCAL_HASH))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def import_upload(service: Service, key: object, path: object, *, allow_untrusted: bool = False) -> ImportOutcome:
    """Verify the uploaded bundle with this app's key and import it under the key's session (nothing is imported
    unless every check passes). A bundle signed by another key (its manifest.signature row is not verifiable under
    this app's key; the other rows are checked under the key it carries) is imported only with `allow_untrusted`,
    then recorded as unverified. Raises SessionKeyError, BadInput (nothing read); a refused bundle is an
    ImportOutcome."""
    session = service.session(key)
    p = check_bundle_upload(path)
    own = [service.engine.key.public_key]
    local = local_id(session, _sha256(p))
    try:
        done = import_bundle(service.data_dir, p, as_session=local, trusted=own, allow_untrusted=allow_untrusted, stores=_stores(service))
    except ImportRefused as exc:
        if exc.verdict == "unverified" and exc.report is not None and exc.report.not_verifiable[0].name == "manifest.signature":
            return ImportOutcome(
                None,
                exc.report,
                f"not signed by this app's key ({service.key_id}): the bundle comes from another server. Nothing "
                "failed against the key it carries; tick “import unverified” to import it labelled unverified",
            )
        return ImportOutcome(None, exc.report, _clean(str(exc), service, p))
    except BundleError as exc:
        return ImportOutcome(None, None, _clean(str(exc), service, p))  # refused for its structure: no check ran
    if done.duplicate and not owns(session, done.origin):
        return ImportOutcome(
            None, done.report, "this bundle is already imported on this server, under another visitor's session; nothing changed"
        )
    return ImportOutcome(done, done.report)


def import_base64(service: Service, key: object, data: object, *, allow_untrusted: bool = False) -> ImportOutcome:
    """For MCP: the bundle's bytes as base64, imported as an upload would be (the copy is removed afterwards)."""
    service.session(key)
    if not isinstance(data, str) or not data.strip():
        raise BadInput("bundle_base64: give the bundle file's bytes as base64")
    if len(data) > 4 * (MAX_BUNDLE_UPLOAD_BYTES // 3 + 1) + 4:
        raise BadInput(f"bundle_base64: over the {MAX_BUNDLE_UPLOAD_BYTES:,}-byte bundle limit; {CLI_HINT}")
    try:
        raw = base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        raise BadInput("bundle_base64: not base64") from None
    path = Path(service.downloads.put("upload" + SUFFIX, raw))
    try:
        return import_upload(service, key, path, allow_untrusted=allow_untrusted)
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)


# -- imported sessions: listed, searched, verified against -----------------------------------------------
def imported_sessions(service: Service, key: object) -> list[Origin]:
    """The imported sessions of the key's session, newest import first."""
    session = service.session(key)
    found = (o for o in list_imported(service.data_dir, stores=_stores(service)) if owns(session, o))
    return sorted(found, key=lambda o: o.imported_at, reverse=True)


def imported_session(service: Service, key: object, local: object) -> Origin:
    """One of the key's imported sessions by local id (BadInput for any other)."""
    if not isinstance(local, str) or not local:
        raise BadInput("imported session: choose one first")
    for o in imported_sessions(service, key):
        if o.local == local:
            return o
    raise BadInput("imported session: not one of this session's imports")


def search_imported(service: Service, key: object, local: object, query: object, k: object) -> tuple[Origin, SearchResponse]:
    """Search one of the key's imported sessions, read-only: its own index in its own folder; revoked and
    superseded memories left out, as for the visitor's own session."""
    origin = imported_session(service, key, local)
    q, k_ = check_query(query), parse_k(k)
    try:
        with open_imported(service.data_dir, origin.local, stores=_stores(service)) as st:
            return origin, _search(st.ledger, st.index, origin.session, q, k_)
    except SearchError as exc:
        raise BadInput(str(exc)) from None


def _search(led: LedgerStore, idx: SearchIndex, session: str, q: str, k: int) -> SearchResponse:
    state = _controls(led, session)
    exclude = set(state.excluded()) | set(state.supersessions.superseded)
    # nor the offline stand-in's replies, as in the visitor's own session (chat.stand_ins; issue 31)
    return StandIns(led).left_out(
        session, lambda skip: idx.search(session, q, k, exclude_seqs=sorted(exclude.union(skip))), lambda got: got.results
    )


def receipt_home(service: Service, key: object, receipt_session: str) -> Origin | None:
    """The key's imported session holding `receipt_session`'s ledger (a receipt names it), newest import first;
    None when the key has none (another visitor's imports are never consulted)."""
    if not is_session_key(key) or not isinstance(key, str):  # the second for mypy: is_session_key checks it is a str
        return None
    own = session_id(key)
    return next((o for o in find_receipt_home(service.data_dir, receipt_session, stores=_stores(service)) if owns(own, o)), None)


__all__ = [
    "MAX_BUNDLE_UPLOAD_BYTES",
    "MAX_MCP_BUNDLE_BYTES",
    "ImportOutcome",
    "bundle_name",
    "check_bundle_upload",
    "export_base64",
    "export_bundle",
    "export_markdown",
    "import_base64",
    "import_upload",
    "imported_session",
    "imported_sessions",
    "is_export_copy",
    "local_id",
    "markdown_name",
    "owns",
    "receipt_home",
    "search_imported",
]
