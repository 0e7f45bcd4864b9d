"""A witnessed session's bundle on PostgreSQL (docs/FORMAT.md §21.1): migrated from the files, it exports the same
bytes, witnessed notes included, and they verify under the policy."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest

from bundle import export_session, verify_file
from receipts.cosignature import parse_policy
from storage import migrate as pg_migrate
from storage import migrate_receipts as receipts_migrate
from storage.local import load_existing
from storage.stores import pg_stores
from tests.services.test_bundle_witnessed import build_witnessed

AT = "2026-12-05T09:00:00.123456Z"


@pytest.mark.pg
def test_a_witnessed_session_exports_the_same_notes_from_postgresql_as_from_the_files(tmp_path: Path, pg_url: str) -> None:
    saved = {k: os.environ.pop(k, None) for k in ("GROQ_API_KEY", "RECEIPT_SIGNING_KEY", "RECEIPT_KEYS_DIR", "DATABASE_URL")}
    try:
        w = build_witnessed(tmp_path / "source", remember_after=False)  # the latest checkpoint is the last turn's
        key = load_existing(w["data"])  # the data directory's own key (RECEIPT_KEYS_DIR unset, as when it was made)
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
    data = tmp_path / "migrated"
    shutil.copytree(w["data"], data)
    st = pg_stores(pg_url, data)
    try:
        assert st.database is not None
        assert [m.status for m in pg_migrate.migrate(data, st.ledger)] == ["copied"]
        receipts_migrate.migrate_receipts(data, st.database)
        from_files = export_session(data, "alice", tmp_path / "files.mre.zip", key=key, exported_at=AT)
        from_pg = export_session(data, "alice", tmp_path / "pg.mre.zip", key=key, stores=st, exported_at=AT)
    finally:
        st.close()
    assert from_pg.path.read_bytes() == from_files.path.read_bytes()
    with zipfile.ZipFile(from_pg.path) as z:
        assert len([n for n in z.namelist() if n.startswith("notes/")]) == 2
    from storage.offline import load_trust

    report = verify_file(from_pg.path, load_trust([w["pub"]]), policy=parse_policy(w["policy"].read_bytes()))
    assert report.verdict == "verified", [c.to_dict() for c in report.checks if c.status != "pass"]
