"""Receipts, the producer's Merkle tree and checkpoints on PostgreSQL (storage/pg/receipts.py, storage/pg/merkle.py),
compared with the file backend (storage.files.receipts.file_backend) and the RFC 6962 vectors (../shared/data/merkle_vectors)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from receipts import checkpoints
from receipts.body import MAX_RECEIPT_BYTES, dump_file, sign_checkpoint
from receipts.keys import SigningKey
from receipts.merkle import EMPTY_ROOT, consistency_proof, inclusion_proof, leaf_hash, root_from_leaf_hashes
from receipts.merkle_nodes import appended_nodes, consistency_ranges, edge_nodes, fold, inclusion_ranges, subtree_nodes
from receipts.stores import PendingCites, ReceiptBackend, ReceiptNotFound, ReceiptRows
from storage.common.checkpoint_issue import issue
from storage.common.tree_errors import MerkleStoreError
from storage.files.ledger.store import Ledger
from storage.files.receipts import checkpoint_files as checkpoints_files
from storage.files.receipts import files
from storage.files.receipts.file_backend import FileBackend, IndexRows
from storage.files.receipts.merkle_store import MerkleStore
from tests.core.test_merkle import CONSISTENCY_FILES, INCLUSION_FILES, RFC6962_LEAVES, RFC6962_ROOTS, _b64, _load

RID = "rcpt_" + "ab" * 16
RID2 = "rcpt_" + "cd" * 16
KEY = SigningKey.from_seed(bytes(range(32)))
HOSTILE_SESSIONS = ["../x", "a/b", "", "x" * 65, "a\x00b", "a b", "sess\n", "é"]
HOSTILE_RECEIPTS = ["rcpt_../../etc", "rcpt_" + "AB" * 16, "rcpt_" + "ab" * 15, "x" + RID, RID + ".json", ""]


def _leaves(n: int, seed: int = 1) -> list[bytes]:
    rnd = random.Random(seed)
    return [rnd.randbytes(32) for _ in range(n)]


# --- the pure node planning (no server) ------------------------------------------------------------


class _DictTree:
    """A node store in a dict, driven by receipts.merkle_nodes alone."""

    def __init__(self) -> None:
        self.nodes: dict[tuple[int, int], bytes] = {}
        self.size = 0

    def extend(self, hashes: list[bytes]) -> None:
        edge = {n: self.nodes[n] for n in edge_nodes(self.size)}
        for level, idx, h in appended_nodes(self.size, hashes, edge):
            assert (level, idx) not in self.nodes, "a complete node is written once"
            self.nodes[(level, idx)] = h
        self.size += len(hashes)

    def hash(self, lo: int, hi: int) -> bytes:
        return fold([self.nodes[p] for p in subtree_nodes(lo, hi)])


class TestNodePlanning:
    def test_planned_roots_and_proofs_equal_the_pure_functions_for_every_size_up_to_40(self) -> None:
        hashes = [leaf_hash(x) for x in _leaves(40)]
        tree = _DictTree()
        rnd = random.Random(7)
        while tree.size < 40:
            tree.extend(hashes[tree.size : tree.size + rnd.randint(1, 5)])
        for n in range(1, 41):
            assert tree.hash(0, n) == root_from_leaf_hashes(hashes[:n]), n
            for i in range(n):
                assert [tree.hash(lo, hi) for lo, hi in inclusion_ranges(i, n)] == inclusion_proof(hashes[:n], i), (i, n)
            for m in range(1, n + 1):
                assert [tree.hash(lo, hi) for lo, hi in consistency_ranges(m, n)] == consistency_proof(hashes[:n], m, n), (m, n)

    def test_only_complete_subtrees_are_stored(self) -> None:
        tree = _DictTree()
        tree.extend([leaf_hash(x) for x in _leaves(13)])
        assert all((idx + 1) << level <= 13 for level, idx in tree.nodes)
        assert len(tree.nodes) == 13 + 6 + 3 + 1

    def test_a_root_reads_popcount_n_nodes(self) -> None:
        for n in (1, 2, 3, 7, 8, 1000, 2**20 + 5):
            assert len(subtree_nodes(0, n)) == bin(n).count("1")

    @pytest.mark.parametrize(("lo", "hi"), [(0, 0), (3, 2), (-1, 4), (1, 3)])
    def test_an_empty_or_unaligned_range_is_refused(self, lo: int, hi: int) -> None:
        with pytest.raises(ValueError, match="merkle nodes"):
            subtree_nodes(lo, hi)



class TestFileBackend:
    def test_the_file_backend_is_a_receipt_backend(self, tmp_path: Path) -> None:
        backend: ReceiptBackend = FileBackend(tmp_path)  # mypy checks the Protocol
        assert backend.receipt_ids("s1") == []

    def test_index_rows_write_the_rows_the_engine_writes(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        from chat.engine import Engine
        from chat.llm import LLM

        monkeypatch.delenv("GROQ_API_KEY", raising=False)
        engine = Engine(tmp_path, llm=LLM(api_key=""))
        engine.remember("s1", "my dog is called Rex")
        turn = engine.turn("s1", "what is my dog called?", k=4)
        rows: ReceiptRows = IndexRows(engine.index)  # mypy checks the Protocol
        query = "SELECT * FROM receipts WHERE receipt_id = ?"
        with engine.index.read() as conn:
            want = conn.execute(query, [turn.receipt_id]).fetchall()
            cited = conn.execute("SELECT * FROM receipt_cites ORDER BY cited_seq").fetchall()
        rows.forget_rows("s1", [turn.receipt_id])
        with engine.index.read() as conn:
            assert conn.execute(query, [turn.receipt_id]).fetchall() == []
        rows.record_row("s1", turn.receipt_id, str(turn.receipt_path), turn.body)
        rows.record_cites("s1", turn.receipt_id, turn.assistant_event.seq, [c[1] for c in cited])
        with engine.index.read() as conn:
            assert conn.execute(query, [turn.receipt_id]).fetchall() == want and len(want) == 1
            assert conn.execute("SELECT * FROM receipt_cites ORDER BY cited_seq").fetchall() == cited
        assert sorted(rows.citing_answers("s1", [0, 1])) == [(c[1], c[2]) for c in cited]


# --- PostgreSQL -----------------------------------------------------------------------------------



@pytest.fixture
def db(pg_url: str) -> Iterator[Any]:
    from storage.pg.connect import Database

    with Database(pg_url, max_size=6) as database:
        yield database


@pytest.fixture
def pg(db: Any) -> Iterator[Any]:
    from storage.pg.receipts import PgReceipts

    with PgReceipts(db) as store:
        yield store


def _file_tree(tmp_path: Path, leaves: list[bytes]) -> MerkleStore:
    store = MerkleStore(tmp_path / "tree")
    store.extend(leaves)
    return store


@pytest.mark.pg
class TestPgMerkle:
    def test_roots_and_proofs_equal_the_file_stores_at_every_size(self, db: Any, tmp_path: Path) -> None:
        from storage.pg.merkle import PgMerkleStore

        leaves = _leaves(37)
        tree = PgMerkleStore(db, "s1")
        rnd = random.Random(3)
        done = 0
        while done < len(leaves):  # uneven batches, single appends among them
            step = rnd.choice([1, 1, 2, 5, 9])
            if step == 1:
                assert tree.append(leaves[done]) == done
            else:
                tree.extend(leaves[done : done + step])
            done = min(done + step, len(leaves))
        with _file_tree(tmp_path, leaves) as ref:
            assert tree.size == ref.size == 37
            assert tree.root(0) == EMPTY_ROOT
            for n in range(1, 38):
                assert tree.root(n) == ref.root(n), n
                for i in range(0, n, 3):
                    assert tree.inclusion_proof(i, n) == ref.inclusion_proof(i, n), (i, n)
                for m in range(1, n + 1, 4):
                    assert tree.consistency_proof(m, n) == ref.consistency_proof(m, n), (m, n)
            assert [tree.leaf_hash(i) for i in range(37)] == [ref.leaf_hash(i) for i in range(37)]

    def test_proofs_read_together_equal_each_proof_read_alone_on_both_stores(self, db: Any, tmp_path: Path) -> None:
        from storage.pg.merkle import PgMerkleStore

        leaves = _leaves(37)
        tree = PgMerkleStore(db, "s1")
        tree.extend(leaves)
        rnd = random.Random(5)
        with _file_tree(tmp_path, leaves) as ref:
            for n in (1, 2, 7, 16, 33, 37):
                wanted = [rnd.randrange(n) for _ in range(9)] + [n - 1, 0, n - 1]  # repeats are answered once
                together = tree.inclusion_proofs(wanted, n)
                assert set(together) == set(wanted)
                assert together == {i: ref.inclusion_proof(i, n) for i in wanted} == ref.inclusion_proofs(wanted, n), n
            with pytest.raises(ValueError, match=r"inclusion_proofs: index out of range"):
                tree.inclusion_proofs([0, 37], 37)
            with pytest.raises(ValueError, match=r"inclusion_proofs: tree size out of range"):
                tree.inclusion_proofs([0], 38)

    def test_the_rfc6962_leaves_give_the_known_roots_and_the_vectors_proofs(self, db: Any) -> None:
        from storage.pg.merkle import PgMerkleStore

        tree = PgMerkleStore(db, "rfc")
        tree.extend(RFC6962_LEAVES)
        assert [tree.root(n) for n in range(1, 9)] == RFC6962_ROOTS
        checked = 0
        for path in INCLUSION_FILES:
            v = _load(path)
            if path.name != "happy-path.json":
                continue
            i, n = v["leafIdx"], v["treeSize"]
            assert _b64(v["leafHash"]) == leaf_hash(RFC6962_LEAVES[i]), path
            assert tree.inclusion_proof(i, n) == [_b64(p) for p in v["proof"] or []], path
            assert tree.root(n) == _b64(v["root"]), path
            checked += 1
        for path in CONSISTENCY_FILES:
            v = _load(path)
            if path.name != "happy-path.json":
                continue
            m, n = v["size1"], v["size2"]
            assert (tree.root(m), tree.root(n)) == (_b64(v["root1"]), _b64(v["root2"])), path
            assert tree.consistency_proof(m, n) == [_b64(p) for p in v["proof"] or []], path
            checked += 1
        assert checked >= 10

    def test_an_append_onto_a_tree_another_writer_moved_writes_nothing(self, db: Any) -> None:
        from storage.pg.merkle import PgMerkleStore, TreeMoved

        tree = PgMerkleStore(db, "s1")
        tree.extend(_leaves(5))
        root = tree.root()
        with pytest.raises(TreeMoved, match="expected 4 leaves, found 5"):
            tree.extend(_leaves(3, seed=9), at=4)
        assert (tree.size, tree.root()) == (5, root)

    def test_concurrent_appenders_leave_a_consistent_tree(self, db: Any) -> None:
        """Two replicas appending to one tree without the turn lock: the row lock serialises them."""
        from storage.pg.merkle import PgMerkleStore

        def writer(seed: int) -> None:
            tree = PgMerkleStore(db, "race")
            for batch in range(12):
                tree.extend(_leaves(1 + batch % 4, seed=seed * 100 + batch))

        threads = [threading.Thread(target=writer, args=(s,)) for s in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        tree = PgMerkleStore(db, "race")
        n = tree.size
        assert n == 2 * sum(1 + b % 4 for b in range(12))
        hashes = [tree.leaf_hash(i) for i in range(n)]
        for m in range(1, n + 1):
            assert tree.root(m) == root_from_leaf_hashes(hashes[:m]), m

    def test_truncate_keeps_the_earlier_history_and_regrows_identically(self, db: Any, tmp_path: Path) -> None:
        from storage.pg.merkle import PgMerkleStore

        leaves = _leaves(21)
        tree = PgMerkleStore(db, "s1")
        tree.extend(leaves)
        tree.truncate(11)
        with _file_tree(tmp_path, leaves) as ref:
            assert (tree.size, tree.root()) == (11, ref.root(11))
            tree.extend(leaves[11:])
            assert tree.root() == ref.root()
            assert tree.consistency_proof(3, 21) == ref.consistency_proof(3, 21)

    @pytest.mark.parametrize(("call", "args"), [("root", (6,)), ("inclusion_proof", (5, 5)), ("inclusion_proof", (-1,)), ("consistency_proof", (0, 3)), ("leaf_hash", (5,))])
    def test_out_of_range_sizes_and_indexes_are_refused_with_where_and_what(self, db: Any, call: str, args: tuple[int, ...]) -> None:
        from storage.pg.merkle import PgMerkleStore

        tree = PgMerkleStore(db, "s1")
        tree.extend(_leaves(5))
        with pytest.raises(ValueError, match=r"merkle tree of session s1 \(PostgreSQL\): .* out of range|expected 0 < m"):
            getattr(tree, call)(*args)

    def test_a_missing_node_is_reported_not_folded(self, db: Any) -> None:
        from storage.pg.merkle import PgMerkleStore

        tree = PgMerkleStore(db, "s1")
        tree.extend(_leaves(8))
        with db.transaction() as conn:
            conn.execute("DELETE FROM merkle_nodes WHERE session = 's1' AND level = 3")
        with pytest.raises(MerkleStoreError, match="level 3 node 0 is missing from a tree of 8 leaves"):
            tree.root()

    def test_synced_tree_follows_the_ledger_like_the_file_backends(self, pg: Any, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        for i in range(9):
            led.append("s1", "user", f"message {i}", {})
        with pg.synced_tree(led, "s1") as tree, FileBackend(tmp_path).synced_tree(led, "s1") as ref:  # type: ignore[attr-defined]
            assert (tree.size, tree.root()) == (9, ref.root())
        led.append("s1", "assistant", "an answer", {})
        tree = pg.synced_tree(led, "s1")
        with FileBackend(tmp_path).synced_tree(led, "s1") as ref:  # type: ignore[attr-defined]
            assert (tree.size, tree.root()) == (10, ref.root())
        with pg.db.transaction() as conn:  # a tree whose last leaf disagrees with the ledger is rebuilt
            conn.execute("UPDATE merkle_nodes SET hash = %s WHERE session = 's1' AND level = 0 AND idx = 9", (bytes(32),))
        with FileBackend(tmp_path).synced_tree(led, "s1") as ref:  # type: ignore[attr-defined]
            assert pg.synced_tree(led, "s1").root() == ref.root()


@pytest.mark.pg
class TestPgReceiptStore:
    ENVELOPE = {"payload": "eyJ4IjoxfQ==", "payloadType": "application/vnd.mre.receipt+json", "signatures": [{"keyid": "k", "sig": "c2ln"}], "disclosures": [{"seq": 0, "text": "caf\u00e9 \u2603 \U0001f600"}]}

    def test_the_pg_store_is_a_receipt_backend_and_rows(self, pg: Any) -> None:
        backend: ReceiptBackend = pg  # mypy checks the Protocols
        rows: ReceiptRows = pg
        assert backend.receipt_ids("s1") == [] and rows.citing_answers("s1", [1]) == []

    def test_a_receipt_reads_back_byte_identical_to_the_file_backends_file(self, pg: Any, tmp_path: Path) -> None:
        where = pg.write_receipt("s1", RID, self.ENVELOPE)
        path = files.write_receipt(tmp_path, "s1", RID, self.ENVELOPE)
        assert pg.read_receipt("s1", RID) == path.read_bytes() == FileBackend(tmp_path).read_receipt("s1", RID)
        assert where == f"postgresql:receipts/s1/{RID}"

    def test_a_copy_for_the_visitor_holds_the_same_bytes(self, db: Any, tmp_path: Path) -> None:
        from storage.pg.receipts import PgReceipts

        store = PgReceipts(db, copies=tmp_path / "copies")
        where = Path(store.write_receipt("s1", RID, self.ENVELOPE))
        assert where == tmp_path / "copies" / "s1" / f"{RID}.json"
        assert where.read_bytes() == store.read_receipt("s1", RID)
        store.replace_receipt("s1", RID, b"{}\n")  # a redaction reaches the copy too
        assert where.read_bytes() == b"{}\n"

    def test_receipts_list_in_write_order_and_are_replaced_and_deleted(self, pg: Any) -> None:
        pg.write_receipt("s1", RID2, self.ENVELOPE)
        pg.write_receipt("s1", RID, self.ENVELOPE)
        pg.write_receipt("s2", "rcpt_" + "ee" * 16, self.ENVELOPE)
        assert pg.receipt_ids("s1") == [RID2, RID]
        pg.replace_receipt("s1", RID2, b"redacted\n")
        assert pg.read_receipt("s1", RID2) == b"redacted\n" and pg.receipt_ids("s1") == [RID2, RID]
        pg.delete_receipt("s1", RID2)
        pg.delete_receipt("s1", RID2)  # idempotent
        assert pg.receipt_ids("s1") == [RID]
        with pytest.raises(ReceiptNotFound, match=f"session s1: no receipt {RID2}"):
            pg.read_receipt("s1", RID2)
        with pytest.raises(FileNotFoundError):  # what callers that read receipt files catch
            pg.replace_receipt("s1", RID2, b"x")

    def test_a_receipt_of_another_session_is_neither_read_nor_overwritten(self, pg: Any) -> None:
        pg.write_receipt("s1", RID, self.ENVELOPE)
        with pytest.raises(ReceiptNotFound):
            pg.read_receipt("s2", RID)
        with pytest.raises(ValueError, match="already used by another session"):
            pg.write_receipt("s2", RID, {"other": 1})
        assert pg.read_receipt("s1", RID) == dump_file(self.ENVELOPE)

    def test_a_receipt_over_the_size_cap_is_refused_unread(self, pg: Any) -> None:
        with pg.db.transaction() as conn:
            conn.execute("INSERT INTO receipts (receipt_id, session, envelope) VALUES (%s, 's1', %s)", (RID, b"x" * (MAX_RECEIPT_BYTES + 1)))
        with pytest.raises(ValueError, match=f"receipt {RID}: {MAX_RECEIPT_BYTES + 1} bytes is over the"):
            pg.read_receipt("s1", RID)

    @pytest.mark.parametrize("session", HOSTILE_SESSIONS)
    def test_a_hostile_session_id_is_refused_before_any_sql(self, pg: Any, session: str) -> None:
        calls: list[Callable[[], object]] = [
            lambda: pg.write_receipt(session, RID, self.ENVELOPE),
            lambda: pg.read_receipt(session, RID),
            lambda: pg.receipt_ids(session),
            lambda: pg.write_cites(session, RID, 1, [0]),
            lambda: pg.pending_cites(session),
            lambda: pg.latest_checkpoint(session),
            lambda: pg.forget_session(session),
            lambda: pg.tree(session),
            lambda: pg.record_cites(session, RID, 3, [1]),
        ]
        for call in calls:
            with pytest.raises(ValueError, match="session"):
                call()
        with pytest.raises(ValueError, match="session"), pg.turn_lock(session):
            pass
        with pg.db.connection() as conn:
            assert conn.execute("SELECT (SELECT count(*) FROM receipts) + (SELECT count(*) FROM receipt_pending_cites) + (SELECT count(*) FROM receipt_cites) + (SELECT count(*) FROM merkle_trees)").fetchone() == (0,)

    @pytest.mark.parametrize("receipt_id", HOSTILE_RECEIPTS)
    def test_a_hostile_receipt_id_is_refused(self, pg: Any, receipt_id: str) -> None:
        calls: list[Callable[[], object]] = [
            lambda: pg.write_receipt("s1", receipt_id, self.ENVELOPE),
            lambda: pg.read_receipt("s1", receipt_id),
            lambda: pg.replace_receipt("s1", receipt_id, b"x"),
            lambda: pg.delete_receipt("s1", receipt_id),
            lambda: pg.write_cites("s1", receipt_id, 1, []),
        ]
        for call in calls:
            with pytest.raises(ValueError, match="receipt id .* is not valid"):
                call()
        assert pg.receipt_ids("s1") == []

    def test_pending_cites_are_kept_until_the_receipt_says_them(self, pg: Any, tmp_path: Path) -> None:
        pg.write_cites("s1", RID, 4, [0, 2])
        pg.write_cites("s1", RID2, 7, [])
        FileBackend(tmp_path).write_cites("s1", RID, 4, [0, 2])
        assert pg.pending_cites("s1") == FileBackend(tmp_path).pending_cites("s1")[:1] + [PendingCites(RID2, 7, ())]
        pg.drop_cites("s1", RID2)
        assert [c.receipt_id for c in pg.pending_cites("s1")] == [RID]
        with pytest.raises(ValueError, match="non-negative integers"):
            pg.write_cites("s1", RID2, -1, [])

    def test_cited_rows_answer_which_answers_cited_a_seq(self, pg: Any, tmp_path: Path) -> None:
        import sqlite3

        lite = sqlite3.connect(":memory:")
        lite.executescript(files.RECEIPTS_DDL)
        for rows in (pg, None):
            for rid, answer, cited in ((RID, 5, [4, 1, 1]), (RID2, 9, [8, 5])):
                if rows is None:
                    files.record_cites(lite, "s1", rid, answer, cited)
                else:
                    rows.record_cites("s1", rid, answer, cited)
        assert sorted(pg.citing_answers("s1", [1, 5, 6])) == sorted(files.citing_answers(lite, "s1", [1, 5, 6])) == [(1, 5), (5, 9)]
        pg.forget_rows("s1", [RID2])
        assert pg.citing_answers("s1", [1, 5]) == [(1, 5)]
        pg.forget_rows("s1")
        assert pg.citing_answers("s1", [1]) == []


def _checkpoint(session: str, size: int) -> dict[str, Any]:
    return sign_checkpoint(session=session, tree_size=size, root=size.to_bytes(32, "big"), chain_head="ab" * 32, issued_at="2026-12-05T06:00:00.000000Z", key=KEY)


@pytest.mark.pg
class TestPgCheckpoints:
    def test_the_latest_checkpoint_is_the_bytes_checkpoint_json_holds(self, pg: Any, tmp_path: Path) -> None:
        cp = _checkpoint("s1", 3)
        assert pg.latest_checkpoint("s1") is None
        assert pg.keep_checkpoint("s1", cp) is True
        (tmp_path / "sessions" / "s1").mkdir(parents=True)  # the ledger's folder, where checkpoint.json goes
        path = checkpoints_files.keep(tmp_path, "s1", cp)
        assert pg.checkpoint_bytes("s1") == path.read_bytes()
        assert pg.latest_checkpoint("s1") == checkpoints_files.latest(tmp_path, "s1") == cp

    def test_a_smaller_tree_never_replaces_a_larger_ones_checkpoint(self, pg: Any) -> None:
        assert pg.keep_checkpoint("s1", _checkpoint("s1", 9)) is True
        assert pg.keep_checkpoint("s1", _checkpoint("s1", 4)) is False
        assert pg.latest_checkpoint("s1")["body"]["tree_size"] == 9
        assert pg.keep_checkpoint("s1", _checkpoint("s1", 4), allow_shrink=True) is True  # a repair cut the ledger
        assert pg.latest_checkpoint("s1")["body"]["tree_size"] == 4

    def test_two_threads_issuing_checkpoints_never_move_it_backwards(self, pg: Any) -> None:
        sizes = list(range(1, 61))
        seen: list[int] = []
        stop = threading.Event()

        def writer(order: list[int]) -> None:
            for size in order:
                pg.keep_checkpoint("s1", _checkpoint("s1", size))

        def reader() -> None:
            while not stop.is_set():
                cp = pg.latest_checkpoint("s1")
                if cp is not None:
                    seen.append(cp["body"]["tree_size"])

        orders = [sizes, random.Random(5).sample(sizes, len(sizes))]
        threads = [threading.Thread(target=writer, args=(o,)) for o in orders]
        watch = threading.Thread(target=reader)
        watch.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        stop.set()
        watch.join(timeout=30)
        assert pg.latest_checkpoint("s1")["body"]["tree_size"] == 60
        assert seen and seen == sorted(seen), "a reader saw the checkpoint move backwards"

    def test_a_checkpoint_of_another_session_or_malformed_is_refused(self, pg: Any) -> None:
        with pytest.raises(ValueError, match="names session 's2'"):
            pg.keep_checkpoint("s1", _checkpoint("s2", 3))
        bad = _checkpoint("s1", 3)
        bad["body"] = {**bad["body"], "v": 99}
        with pytest.raises(checkpoints.MalformedCheckpoint, match="body.v"):
            pg.keep_checkpoint("s1", bad)
        with pg.db.transaction() as conn:
            conn.execute("INSERT INTO checkpoints (session, tree_size, data) VALUES ('s1', 3, %s)", (b'{"body": 1}',))
        with pytest.raises(checkpoints.MalformedCheckpoint, match="checkpoints row of session s1"):
            pg.latest_checkpoint("s1")

    def test_issue_signs_the_same_tree_on_both_backends(self, pg: Any, tmp_path: Path) -> None:
        led = Ledger(tmp_path)
        for i in range(6):
            led.append("s1", "user", f"message {i}", {})
        on_pg = issue(pg, led, "s1", KEY)
        on_files = issue(FileBackend(tmp_path), led, "s1", KEY)
        fields = ("tree_size", "root", "chain_head", "session")
        assert [on_pg["body"][f] for f in fields] == [on_files["body"][f] for f in fields]
        assert pg.latest_checkpoint("s1") == on_pg and checkpoints_files.latest(tmp_path, "s1") == on_files

    def test_forgetting_a_session_leaves_nothing_of_it_and_nothing_of_others_goes(self, pg: Any) -> None:
        for session in ("s1", "s2"):
            pg.write_receipt(session, RID if session == "s1" else RID2, {"x": 1})
            pg.write_cites(session, RID, 1, [0])
            pg.record_cites(session, RID, 2, [1])
            pg.tree(session).extend(_leaves(3))
            pg.keep_checkpoint(session, _checkpoint(session, 3))
        pg.forget_session("s1")
        assert (pg.receipt_ids("s1"), pg.pending_cites("s1"), pg.citing_answers("s1", [1]), pg.tree("s1").size, pg.latest_checkpoint("s1")) == ([], [], [], 0, None)
        assert (pg.receipt_ids("s2"), pg.tree("s2").size, pg.latest_checkpoint("s2")["body"]["tree_size"]) == ([RID2], 3, 3)


@pytest.mark.pg
class TestPgTurnLock:
    def test_a_second_replica_waits_for_the_session_and_not_for_another(self, pg_url: str) -> None:
        from storage.pg.connect import Database
        from storage.pg.receipts import PgReceipts

        with Database(pg_url, max_size=3) as db1, Database(pg_url, max_size=3) as db2, PgReceipts(db1) as one, PgReceipts(db2) as two:
            held, got = threading.Event(), threading.Event()

            def second() -> None:
                with two.turn_lock("s1"):
                    got.set()

            with one.turn_lock("s1"):
                held.set()
                t = threading.Thread(target=second)
                t.start()
                with two.turn_lock("s2"):  # another session is not held up
                    pass
                time.sleep(0.3)
                assert not got.is_set(), "the second replica took a lock the first one holds"
            t.join(timeout=30)
            assert got.is_set()

    def test_a_turn_outlives_an_idle_in_transaction_timeout(self, db: Any) -> None:
        import psycopg.sql

        from storage.pg.receipts import PgReceipts

        with db.transaction() as conn:  # the operator's setting, for every connection opened from now on
            name = conn.execute("SELECT current_database()").fetchone()[0]
            conn.execute(psycopg.sql.SQL("ALTER DATABASE {} SET idle_in_transaction_session_timeout = '100ms'").format(psycopg.sql.Identifier(name)))
        got = threading.Event()
        with PgReceipts(db) as one, PgReceipts(db) as two:  # two replicas

            def other() -> None:
                with two.turn_lock("s1"):
                    got.set()

            with one.turn_lock("s1"):
                time.sleep(0.4)  # a model call longer than the operator's timeout
                t = threading.Thread(target=other)
                t.start()
                time.sleep(0.4)
                assert not got.is_set(), "the lock was lost to the idle timeout in the middle of the turn"
            t.join(timeout=30)
            assert got.is_set()

    def test_turns_holding_locks_never_starve_their_own_writes_of_connections(self, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """As many concurrent turns (distinct sessions) as the shared pool has connections, each writing inside
        its lock: the locks are held on connections of their own, so the writes still get one."""
        from storage.pg import connect
        from storage.pg.receipts import PgReceipts

        monkeypatch.setattr(connect, "POOL_TIMEOUT_S", 3.0)  # a starved write fails in 3 s, not 30
        with connect.Database(pg_url, max_size=2) as db, PgReceipts(db) as store:
            inside = threading.Barrier(2, timeout=20)
            errors: list[BaseException] = []

            def turn(session: str) -> None:
                try:
                    with store.turn_lock(session):
                        inside.wait()  # both locks held at once
                        store.write_cites(session, RID, 1, [0])
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=turn, args=(s,)) for s in ("s1", "s2")]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=30)
            assert errors == [] and [len(store.pending_cites(s)) for s in ("s1", "s2")] == [1, 1]

    def test_a_turn_that_raises_releases_the_lock(self, pg: Any) -> None:
        with pytest.raises(RuntimeError), pg.turn_lock("s1"):
            raise RuntimeError("the model failed")
        done = threading.Event()

        def again() -> None:
            with pg.turn_lock("s1"):
                done.set()

        t = threading.Thread(target=again)
        t.start()
        t.join(timeout=30)
        assert done.is_set()


@pytest.mark.pg
def test_a_killed_server_fails_calls_clearly_and_the_store_recovers_after_its_restart(pg_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL on the server (its own throwaway cluster) between writes: calls in between fail with a BackendError
    naming the server, acknowledged receipts and checkpoints are all there after the restart, and the same store
    objects (pools) work again without being recreated."""
    from storage import BackendError
    from storage.pg import connect
    from storage.pg.receipts import PgReceipts
    from tests import pg_support

    monkeypatch.setattr(connect, "POOL_TIMEOUT_S", 2.0)  # fail within 2 s while the server is down
    with pg_support.started_server() as server:
        url = pg_support.fresh_database(server)
        with connect.Database(url, max_size=3, timeout=5) as db, PgReceipts(db, lock_wait=2.0) as store:
            with store.turn_lock("s1"):
                store.write_receipt("s1", RID, {"x": 1})
                store.keep_checkpoint("s1", _checkpoint("s1", 2))
            pg_support.kill(server)
            with pytest.raises(BackendError, match=r"PostgreSQL at postgresql://mre@127\.0\.0\.1"):
                store.write_receipt("s1", RID2, {"x": 2})
            with pytest.raises(BackendError, match="turn lock"), store.turn_lock("s1"):
                pass
            pg_support.restart(server)
            deadline = time.monotonic() + 30
            while True:  # the pools reconnect on their own
                try:
                    with store.turn_lock("s1"):
                        store.write_receipt("s1", RID2, {"x": 2})
                    break
                except BackendError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            assert store.receipt_ids("s1") == [RID, RID2]
            kept = store.latest_checkpoint("s1")
            assert kept is not None and kept["body"]["tree_size"] == 2


@pytest.mark.pg
def test_a_checkpoint_kept_without_its_flush_is_whole_or_absent_after_a_killed_server_and_durable_after_a_flushed_commit(
    pg_server: Any,
) -> None:
    """keep_checkpoint(durable=False) (a turn's first checkpoint) commits without waiting for its WAL flush: a server
    killed right after keeps the previous checkpoint or this one, whole; once a later commit was flushed (the turn's
    next write), this one survives too (the WAL is one ordered log)."""
    from storage.pg import connect
    from storage.pg.receipts import PgReceipts
    from tests import pg_support

    def killed_and_back(server: Any, store: PgReceipts) -> dict[str, Any] | None:
        pg_support.kill(server)
        pg_support.restart(server)
        deadline = time.monotonic() + 30
        while True:
            try:
                return store.latest_checkpoint("s1")
            except Exception:  # noqa: BLE001 - the pool reconnects on its own
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    with pg_support.started_server() as server:
        url = pg_support.fresh_database(server)
        with connect.Database(url, max_size=3, timeout=5) as db, PgReceipts(db, lock_wait=2.0) as store:
            store.keep_checkpoint("s1", _checkpoint("s1", 2))
            store.keep_checkpoint("s1", _checkpoint("s1", 3), durable=False)
            assert store.latest_checkpoint("s1") == _checkpoint("s1", 3)  # in place at once, for every reader
            kept = killed_and_back(server, store)
            assert kept in (_checkpoint("s1", 2), _checkpoint("s1", 3))
            store.keep_checkpoint("s1", _checkpoint("s1", 4), durable=False)
            store.write_receipt("s1", RID, {"x": 1})  # a synchronous commit after it
            assert killed_and_back(server, store) == _checkpoint("s1", 4)
