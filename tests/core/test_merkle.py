"""receipts.merkle (RFC 6962 / 9162 proofs) and storage.files.receipts.merkle_store (the persisted tree).

Three independent oracles keep the library honest: transparency-dev/merkle's
committed JSON vectors, the RFC 6962 test-leaf roots, and a naive recursive
transcription of RFC 9162 2.1 written here (``NaiveTree``), plus the RFC's own
verification loops (``rfc9162_verify_*``) to cross-check the Go-style verifier.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from receipts.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    MalformedProofError,
    ProofError,
    RootMismatchError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_from_consistency_proof,
    root_from_inclusion_proof,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)
from storage.common.tree_errors import MerkleStoreError
from storage.files.receipts import merkle_store
from storage.files.receipts.merkle_store import MerkleStore

VECTORS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "merkle_vectors"
INCLUSION_FILES = sorted((VECTORS / "inclusion").rglob("*.json"))
CONSISTENCY_FILES = sorted((VECTORS / "consistency").rglob("*.json"))

# Vectors whose verdict we deliberately differ from. Each must still fail *closed*, never open.
STRICTER_THAN_GO = {
    "consistency/additional/sizes-are-equal-one-and-proof-is-empty.json": (
        "its roots are 12-byte placeholders; Go compares roots of any length when size1 == size2, "
        "we require every hash to be 32 bytes"
    ),
}

# RFC 6962 test leaves and the roots of their first 1..8 leaves (transparency-dev testonly / verify_test.go).
RFC6962_LEAVES = [
    bytes.fromhex(h)
    for h in ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]
]
RFC6962_ROOTS = [
    bytes.fromhex(h)
    for h in [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ]
]


# --- independent references ---------------------------------------------------------------------


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class NaiveTree:
    """RFC 9162 2.1.1, 2.1.3.1 and 2.1.4.1, transcribed as written, over leaf *data*; MTH is memoised."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        self.leaves = list(leaves)
        self._mth: dict[tuple[int, int], bytes] = {}

    @staticmethod
    def k(n: int) -> int:
        k = 1
        while k * 2 < n:
            k *= 2
        return k

    def mth(self, lo: int, hi: int) -> bytes:
        if (lo, hi) not in self._mth:
            n = hi - lo
            if n == 0:
                value = _sha(b"")
            elif n == 1:
                value = _sha(b"\x00" + self.leaves[lo])
            else:
                k = self.k(n)
                value = _sha(b"\x01" + self.mth(lo, lo + k) + self.mth(lo + k, hi))
            self._mth[(lo, hi)] = value
        return self._mth[(lo, hi)]

    def root(self, n: int) -> bytes:
        return self.mth(0, n)

    def leaf_hash(self, i: int) -> bytes:
        return self.mth(i, i + 1)

    def path(self, m: int, n: int, lo: int = 0) -> list[bytes]:
        if n == 1:
            return []
        k = self.k(n)
        if m < k:
            return self.path(m, k, lo) + [self.mth(lo + k, lo + n)]
        return self.path(m - k, n - k, lo + k) + [self.mth(lo, lo + k)]

    def proof(self, m: int, n: int) -> list[bytes]:
        return self._subproof(m, 0, n, True)

    def _subproof(self, m: int, lo: int, hi: int, b: bool) -> list[bytes]:
        n = hi - lo
        if m == n:
            return [] if b else [self.mth(lo, hi)]
        k = self.k(n)
        if m <= k:
            return self._subproof(m, lo, lo + k, b) + [self.mth(lo + k, hi)]
        return self._subproof(m - k, lo + k, hi, False) + [self.mth(lo, lo + k)]


def _hash_children(left: bytes, right: bytes) -> bytes:
    return _sha(b"\x01" + left + right)


def rfc9162_verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 2.1.3.2, step by step."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = _hash_children(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = _hash_children(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def rfc9162_verify_consistency(first: int, second: int, proof: Sequence[bytes], root1: bytes, root2: bytes) -> bool:
    """RFC 9162 2.1.4.2, step by step; defined only for 0 < first < second."""
    assert 0 < first < second
    if not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:
        path.insert(0, root1)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = _hash_children(c, fr), _hash_children(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = _hash_children(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == root1 and sr == root2 and sn == 0


def _distinct_leaves(n: int, seed: bytes) -> list[bytes]:
    # Distinct 32-byte "event digests": with duplicate leaves a wrong-index mutant could be a true proof.
    return [_sha(seed + i.to_bytes(4, "big")) for i in range(n)]


def _accepts(check: Callable[[], None]) -> bool:
    try:
        check()
    except ProofError:
        return False
    return True


# --- transparency-dev vectors -------------------------------------------------------------------


def _b64(value: str) -> bytes:
    return base64.b64decode(value)


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _vector_id(path: Path) -> str:
    return path.relative_to(VECTORS).as_posix()


class TestTransparencyDevVectors:
    def test_vector_folders_are_present_and_non_empty(self) -> None:
        assert VECTORS.is_dir(), f"expected merkle vectors at {VECTORS}"
        assert len(INCLUSION_FILES) > 0
        assert len(CONSISTENCY_FILES) > 0
        assert any(p.name == "happy-path.json" for p in INCLUSION_FILES)
        assert any(p.name == "happy-path.json" for p in CONSISTENCY_FILES)

    def test_every_deliberate_divergence_names_an_existing_vector(self) -> None:
        known = {_vector_id(p) for p in INCLUSION_FILES + CONSISTENCY_FILES}
        assert set(STRICTER_THAN_GO) <= known

    @pytest.mark.parametrize("path", INCLUSION_FILES, ids=_vector_id)
    def test_inclusion_vector_verifies_or_is_rejected_as_labelled(self, path: Path) -> None:
        v = _load(path)
        args = (v["leafIdx"], v["treeSize"], _b64(v["leafHash"]), [_b64(p) for p in v["proof"] or []])
        root = _b64(v["root"])
        if v["wantErr"]:
            with pytest.raises(ProofError):
                verify_inclusion(*args, root)
        else:
            verify_inclusion(*args, root)
            assert root_from_inclusion_proof(*args) == root

    @pytest.mark.parametrize("path", CONSISTENCY_FILES, ids=_vector_id)
    def test_consistency_vector_verifies_or_is_rejected_as_labelled(self, path: Path) -> None:
        v = _load(path)
        size1, size2 = v["size1"], v["size2"]
        proof = [_b64(p) for p in v["proof"] or []]
        root1, root2 = _b64(v["root1"]), _b64(v["root2"])
        if v["wantErr"] or _vector_id(path) in STRICTER_THAN_GO:
            with pytest.raises(ProofError):
                verify_consistency(size1, size2, proof, root1, root2)
        else:
            verify_consistency(size1, size2, proof, root1, root2)
            assert root_from_consistency_proof(size1, size2, proof, root1) == root2


# --- hashing and the reference generators -------------------------------------------------------


class TestHashing:
    def test_rfc6962_test_leaves_give_the_known_roots_for_sizes_1_to_8(self) -> None:
        hashes = [leaf_hash(d) for d in RFC6962_LEAVES]
        naive = NaiveTree(RFC6962_LEAVES)
        for n, expected in enumerate(RFC6962_ROOTS, start=1):
            assert naive.root(n) == expected, f"naive reference, size {n}"
            assert root_from_leaf_hashes(hashes[:n]) == expected, f"library, size {n}"

    def test_empty_tree_root_is_sha256_of_nothing(self) -> None:
        assert EMPTY_ROOT == _sha(b"") == root_from_leaf_hashes([])

    def test_leaf_and_node_hashes_are_domain_separated(self) -> None:
        left, right = _sha(b"l"), _sha(b"r")
        assert leaf_hash(left + right) == _sha(b"\x00" + left + right)
        assert node_hash(left, right) == _sha(b"\x01" + left + right)
        assert leaf_hash(left + right) != node_hash(left, right)

    def test_reference_generators_match_the_rfc_recursion_for_every_index_up_to_size_40(self) -> None:
        leaves = _distinct_leaves(40, b"gen")
        naive, hashes = NaiveTree(leaves), [leaf_hash(d) for d in leaves]
        for n in range(1, 41):
            assert root_from_leaf_hashes(hashes[:n]) == naive.root(n)
            for i in range(n):
                assert inclusion_proof(hashes[:n], i) == naive.path(i, n), (i, n)
            for m in range(1, n + 1):
                assert consistency_proof(hashes, m, n) == naive.proof(m, n), (m, n)

    def test_reference_generators_refuse_out_of_range_arguments(self) -> None:
        hashes = [leaf_hash(b"x")] * 3
        for call in (
            lambda: inclusion_proof(hashes, 3),
            lambda: inclusion_proof(hashes, -1),
            lambda: inclusion_proof([], 0),
            lambda: consistency_proof(hashes, 0, 3),
            lambda: consistency_proof(hashes, 2, 1),
            lambda: consistency_proof(hashes, 1, 4),
            lambda: root_from_leaf_hashes([b"short"]),
        ):
            with pytest.raises(ValueError):
                call()


# --- verification: degenerate input fails closed ------------------------------------------------


LEAVES8 = _distinct_leaves(8, b"eight")
TREE8 = NaiveTree(LEAVES8)


class TestVerifyFailsClosed:
    def test_proof_errors_are_value_errors_split_into_malformed_and_mismatch(self) -> None:
        assert issubclass(ProofError, ValueError)
        assert issubclass(MalformedProofError, ProofError)
        assert issubclass(RootMismatchError, ProofError)

    def test_root_mismatch_names_the_leaf_and_carries_expected_and_calculated_roots(self) -> None:
        wrong_root = _sha(b"wrong")
        with pytest.raises(RootMismatchError) as caught:
            verify_inclusion(5, 8, TREE8.leaf_hash(5), TREE8.path(5, 8), wrong_root)
        error = caught.value
        assert error.expected == wrong_root
        assert error.found == TREE8.root(8)
        assert str(error) == (
            f"inclusion proof for leaf 5 of 8: root mismatch: expected {wrong_root.hex()}, "
            f"calculated {TREE8.root(8).hex()}"
        )

    def test_wrong_proof_length_carries_expected_and_found_lengths(self) -> None:
        with pytest.raises(MalformedProofError) as caught:
            verify_inclusion(5, 8, TREE8.leaf_hash(5), TREE8.path(5, 8)[:-1], TREE8.root(8))
        assert (caught.value.expected, caught.value.found) == (3, 2)
        assert str(caught.value).startswith("inclusion proof for leaf 5 of 8: wrong proof length")

    @pytest.mark.parametrize(
        ("index", "size"),
        [(0, 0), (1, 0), (1, 1), (8, 8), (9, 8), (-1, 8), (0, -1), (0, 2**64), (True, 8), (0, True)],
    )
    def test_inclusion_with_an_impossible_index_or_size_is_rejected(self, index: int, size: int) -> None:
        with pytest.raises(MalformedProofError):
            verify_inclusion(index, size, TREE8.leaf_hash(0), [], TREE8.root(8))

    @pytest.mark.parametrize("bad", [b"", b"\x00" * 31, b"\x00" * 33, "0" * 32])
    def test_a_hash_that_is_not_32_bytes_is_rejected_wherever_it_appears(self, bad: Any) -> None:
        leaf, proof, root = TREE8.leaf_hash(2), TREE8.path(2, 8), TREE8.root(8)
        verify_inclusion(2, 8, leaf, proof, root)
        with pytest.raises(MalformedProofError):
            verify_inclusion(2, 8, bad, proof, root)
        with pytest.raises(MalformedProofError):
            verify_inclusion(2, 8, leaf, [proof[0], bad, proof[2]], root)
        with pytest.raises(MalformedProofError):
            verify_inclusion(2, 8, leaf, proof, bad)
        with pytest.raises(MalformedProofError):
            verify_consistency(3, 3, [], bad, bad)
        with pytest.raises(MalformedProofError):
            verify_consistency(3, 8, TREE8.proof(3, 8), TREE8.root(3), bad)

    def test_consistency_from_the_empty_tree_is_rejected_even_with_matching_roots(self) -> None:
        for size2 in (0, 1, 8):
            with pytest.raises(MalformedProofError, match="empty tree is meaningless"):
                verify_consistency(0, size2, [], EMPTY_ROOT, EMPTY_ROOT if size2 == 0 else TREE8.root(size2))

    def test_consistency_with_a_shrinking_tree_is_rejected(self) -> None:
        with pytest.raises(MalformedProofError) as caught:
            verify_consistency(5, 4, [], TREE8.root(5), TREE8.root(4))
        assert (caught.value.expected, caught.value.found) == (5, 4)

    def test_equal_sizes_need_an_empty_proof_and_identical_roots(self) -> None:
        verify_consistency(5, 5, [], TREE8.root(5), TREE8.root(5))
        with pytest.raises(MalformedProofError):
            verify_consistency(5, 5, [TREE8.root(5)], TREE8.root(5), TREE8.root(5))
        with pytest.raises(RootMismatchError):
            verify_consistency(5, 5, [], TREE8.root(5), TREE8.root(6))

    def test_growing_tree_with_an_empty_proof_is_rejected(self) -> None:
        with pytest.raises(MalformedProofError):
            verify_consistency(4, 8, [], TREE8.root(4), TREE8.root(8))

    def test_consistency_root1_mismatch_is_reported_as_root1(self) -> None:
        with pytest.raises(RootMismatchError, match=r"^consistency proof from size 3 to 8: root1 mismatch"):
            verify_consistency(3, 8, TREE8.proof(3, 8), TREE8.root(4), TREE8.root(8))


# --- generated attacks ---------------------------------------------------------------------------


def _flip_bit(h: bytes, bit: int) -> bytes:
    out = bytearray(h)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def inclusion_mutants(
    index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes, rnd: random.Random
) -> Iterator[tuple[str, tuple[int, int, bytes, list[bytes], bytes]]]:
    for i in range(len(proof)):
        bit = rnd.randrange(HASH_SIZE * 8)
        yield (
            f"proof[{i}] bit {bit}",
            (index, size, leaf, [*proof[:i], _flip_bit(proof[i], bit), *proof[i + 1 :]], root),
        )
    if proof:
        yield "truncated", (index, size, leaf, proof[:-1], root)
        yield "first dropped", (index, size, leaf, proof[1:], root)
    yield "extended by random hash", (index, size, leaf, [*proof, _sha(b"x")], root)
    yield "extended by root", (index, size, leaf, [*proof, root], root)
    yield "prefixed by leaf", (index, size, leaf, [leaf, *proof], root)
    for wrong in {index - 1, index + 1, index ^ 1, rnd.randrange(size)} - {index}:
        yield f"index {wrong}", (wrong, size, leaf, proof, root)
    yield "leaf bit 0", (index, size, _flip_bit(leaf, 0), proof, root)
    yield "root bit 255", (index, size, leaf, proof, _flip_bit(root, 255))


def consistency_mutants(
    m: int, n: int, proof: list[bytes], root1: bytes, root2: bytes, rnd: random.Random
) -> Iterator[tuple[str, tuple[int, int, list[bytes], bytes, bytes]]]:
    for i in range(len(proof)):
        bit = rnd.randrange(HASH_SIZE * 8)
        yield f"proof[{i}] bit {bit}", (m, n, [*proof[:i], _flip_bit(proof[i], bit), *proof[i + 1 :]], root1, root2)
    if proof:
        yield "truncated", (m, n, proof[:-1], root1, root2)
        yield "first dropped", (m, n, proof[1:], root1, root2)
    yield "extended by random hash", (m, n, [*proof, _sha(b"x")], root1, root2)
    yield "extended by root2", (m, n, [*proof, root2], root1, root2)
    yield "prefixed by root1", (m, n, [root1, *proof], root1, root2)
    for wrong in {m - 1, m + 1}:
        yield f"size1 {wrong}", (wrong, n, proof, root1, root2)
    if m != n:
        yield "swapped roots", (m, n, proof, root2, root1)
    yield "root1 bit 7", (m, n, proof, _flip_bit(root1, 7), root2)
    yield "root2 bit 7", (m, n, proof, root1, _flip_bit(root2, 7))


@settings(max_examples=150, deadline=None)
@given(size=st.integers(1, 300), seed=st.binary(max_size=8), rnd=st.randoms(use_true_random=False))
def test_every_generated_inclusion_mutant_is_rejected_and_rfc_loop_agrees(
    size: int, seed: bytes, rnd: random.Random
) -> None:
    tree = NaiveTree(_distinct_leaves(size, seed))
    index = rnd.randrange(size)
    leaf, proof, root = tree.leaf_hash(index), tree.path(index, size), tree.root(size)
    verify_inclusion(index, size, leaf, proof, root)
    assert rfc9162_verify_inclusion(index, size, leaf, proof, root)
    slipped, disagreements = [], []
    for name, args in inclusion_mutants(index, size, leaf, proof, root, rnd):
        if _accepts(lambda args=args: verify_inclusion(*args)):
            slipped.append(name)
        if args[0] >= 0 and rfc9162_verify_inclusion(*args):
            disagreements.append(name)
    assert slipped == [], f"mutants accepted for leaf {index} of {size}"
    assert disagreements == [], f"RFC 9162 loop accepted mutants for leaf {index} of {size}"


@settings(max_examples=150, deadline=None)
@given(size2=st.integers(1, 300), seed=st.binary(max_size=8), rnd=st.randoms(use_true_random=False))
def test_every_generated_consistency_mutant_is_rejected_and_rfc_loop_agrees(
    size2: int, seed: bytes, rnd: random.Random
) -> None:
    tree = NaiveTree(_distinct_leaves(size2, seed))
    size1 = rnd.randrange(1, size2 + 1)
    proof, root1, root2 = tree.proof(size1, size2), tree.root(size1), tree.root(size2)
    verify_consistency(size1, size2, proof, root1, root2)
    if size1 < size2:
        assert rfc9162_verify_consistency(size1, size2, proof, root1, root2)
    slipped, disagreements = [], []
    for name, args in consistency_mutants(size1, size2, proof, root1, root2, rnd):
        if _accepts(lambda args=args: verify_consistency(*args)):
            slipped.append(name)
        if 0 < args[0] < args[1] and rfc9162_verify_consistency(*args):
            disagreements.append(name)
    assert slipped == [], f"mutants accepted for sizes {size1} -> {size2}"
    assert disagreements == [], f"RFC 9162 loop accepted mutants for sizes {size1} -> {size2}"


# --- the persisted store ------------------------------------------------------------------------


@contextmanager
def _store_dir() -> Iterator[Path]:
    # Not the tmp_path fixture: hypothesis runs many examples per test function.
    with tempfile.TemporaryDirectory(prefix="merkle-") as name:
        yield Path(name) / "merkle" / "session"


def _assert_store_matches(store: MerkleStore, tree: NaiveTree, n: int, index: int, m: int) -> None:
    root = tree.root(n)
    assert store.root(n) == root
    proof = store.inclusion_proof(index, n)
    assert proof == tree.path(index, n), f"inclusion proof for leaf {index} of {n}"
    verify_inclusion(index, n, store.leaf_hash(index), proof, root)
    cproof = store.consistency_proof(m, n)
    assert cproof == tree.proof(m, n), f"consistency proof {m} -> {n}"
    verify_consistency(m, n, cproof, tree.root(m), root)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_store_matches_naive_reference_for_every_historical_size(data: st.DataObject) -> None:
    size = data.draw(st.integers(1, 300), label="size")
    seed = data.draw(st.binary(max_size=8), label="seed")
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, size - 1)), max_size=6), label="cuts") - {size})
    reopen = data.draw(st.booleans(), label="reopen between batches")
    rnd = data.draw(st.randoms(use_true_random=False))
    leaves = _distinct_leaves(size, seed)
    tree = NaiveTree(leaves)
    with _store_dir() as directory:
        store = MerkleStore(directory)
        for lo, hi in zip([0, *cuts], [*cuts, size], strict=True):
            if hi - lo == 1:
                assert store.append(leaves[lo]) == lo
            else:
                store.extend(leaves[lo:hi])
            if reopen:
                store.close()
                store = MerkleStore(directory)
        with store:
            assert store.size == size
            for n in range(1, size + 1):
                for index in {0, n - 1, rnd.randrange(n)}:
                    _assert_store_matches(store, tree, n, index, rnd.randrange(1, n + 1))
                for m in {1, n}:
                    _assert_store_matches(store, tree, n, 0, m)


def test_store_proofs_match_reference_for_every_index_and_size_up_to_33(tmp_path: Path) -> None:
    leaves = _distinct_leaves(33, b"all")
    tree = NaiveTree(leaves)
    with MerkleStore(tmp_path) as store:
        store.extend(leaves)
        for n in range(1, 34):
            for i in range(n):
                assert store.inclusion_proof(i, n) == tree.path(i, n), (i, n)
                assert store.leaf_hash(i) == tree.leaf_hash(i)
            for m in range(1, n + 1):
                assert store.consistency_proof(m, n) == tree.proof(m, n), (m, n)


class TestMerkleStore:
    def test_empty_store_has_size_zero_and_the_empty_root(self, tmp_path: Path) -> None:
        with MerkleStore(tmp_path) as store:
            assert store.size == 0
            assert store.root() == EMPTY_ROOT == store.root(0)

    def test_append_returns_consecutive_indices_and_hashes_leaf_data(self, tmp_path: Path) -> None:
        with MerkleStore(tmp_path) as store:
            assert [store.append(d) for d in RFC6962_LEAVES] == list(range(8))
            assert [store.root(n) for n in range(1, 9)] == RFC6962_ROOTS
            assert store.leaf_hash(3) == leaf_hash(RFC6962_LEAVES[3])

    def test_extend_across_batch_boundaries_builds_the_same_tree(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(merkle_store, "BATCH_LEAVES", 7)
        leaves = _distinct_leaves(100, b"batches")
        with MerkleStore(tmp_path) as store:
            store.extend(iter(leaves[:3]))
            store.extend(iter(leaves[3:]), durable=True)
            assert store.root() == NaiveTree(leaves).root(100)

    def test_queries_beyond_the_current_size_are_rejected(self, tmp_path: Path) -> None:
        with MerkleStore(tmp_path) as store:
            store.extend(_distinct_leaves(5, b"q"))
            for call in (
                lambda: store.root(6),
                lambda: store.root(-1),
                lambda: store.inclusion_proof(5, 5),
                lambda: store.inclusion_proof(0, 6),
                lambda: store.inclusion_proof(0, 0),
                lambda: store.consistency_proof(0, 5),
                lambda: store.consistency_proof(4, 3),
                lambda: store.consistency_proof(1, 6),
                lambda: store.leaf_hash(5),
            ):
                with pytest.raises(ValueError, match=r"^merkle store .*: "):
                    call()

    def test_store_survives_reopen(self, tmp_path: Path) -> None:
        leaves = _distinct_leaves(77, b"reopen")
        with MerkleStore(tmp_path) as store:
            store.extend(leaves[:50])
            store.flush()
        with MerkleStore(tmp_path) as store:
            assert store.size == 50
            store.extend(leaves[50:])
        with MerkleStore(tmp_path) as store:
            tree = NaiveTree(leaves)
            assert store.size == 77
            assert [store.root(n) for n in range(78)] == [tree.root(n) for n in range(78)]

    def test_torn_last_record_is_healed_at_open(self, tmp_path: Path) -> None:
        leaves = _distinct_leaves(21, b"torn")
        with MerkleStore(tmp_path) as store:
            store.extend(leaves[:20])
        with (tmp_path / "level-00.bin").open("ab") as f:
            f.write(os.urandom(17))
        with MerkleStore(tmp_path) as store:
            assert (tmp_path / "level-00.bin").stat().st_size == 20 * HASH_SIZE
            assert store.size == 20
            store.append(leaves[20])
            _assert_store_matches(store, NaiveTree(leaves), 21, 20, 13)

    def test_a_torn_leaf_drops_that_leaf_and_the_parents_that_covered_it(self, tmp_path: Path) -> None:
        leaves = _distinct_leaves(16, b"torn-leaf")
        with MerkleStore(tmp_path) as store:
            store.extend(leaves)
        level0 = tmp_path / "level-00.bin"
        os.truncate(level0, level0.stat().st_size - 5)
        with MerkleStore(tmp_path) as store:
            assert store.size == 15
            for level in range(1, 5):
                assert (tmp_path / f"level-{level:02d}.bin").stat().st_size == (15 >> level) * HASH_SIZE
            assert store.root() == NaiveTree(leaves).root(15)
            store.append(leaves[15])  # the caller re-appends what its ledger has and the store lost
            assert store.root() == NaiveTree(leaves).root(16)

    def test_missing_upper_level_files_are_recomputed_at_open(self, tmp_path: Path) -> None:
        leaves = _distinct_leaves(45, b"missing")
        with MerkleStore(tmp_path) as store:
            store.extend(leaves)
        (tmp_path / "level-01.bin").unlink()
        (tmp_path / "level-03.bin").unlink()
        with (tmp_path / "level-02.bin").open("r+b") as f:
            f.truncate(3 * HASH_SIZE)
        with MerkleStore(tmp_path) as store:
            tree = NaiveTree(leaves)
            assert [store.root(n) for n in range(46)] == [tree.root(n) for n in range(46)]
            _assert_store_matches(store, tree, 45, 9, 17)

    def test_upper_levels_ahead_of_the_leaves_are_truncated_at_open(self, tmp_path: Path) -> None:
        leaves = _distinct_leaves(32, b"ahead")
        with MerkleStore(tmp_path) as store:
            store.extend(leaves)
        os.truncate(tmp_path / "level-00.bin", 19 * HASH_SIZE)  # whole leaf records lost, parents persisted
        with MerkleStore(tmp_path) as store:
            assert store.size == 19
            assert [(tmp_path / f"level-{lv:02d}.bin").stat().st_size // HASH_SIZE for lv in range(6)] == [
                19,
                9,
                4,
                2,
                1,
                0,
            ]
            store.extend(leaves[19:])
            assert store.root() == NaiveTree(leaves).root(32)

    def test_truncate_returns_the_store_to_an_earlier_tree(self, tmp_path: Path) -> None:
        leaves = _distinct_leaves(40, b"truncate")
        tree = NaiveTree(leaves)
        with MerkleStore(tmp_path) as store:
            store.extend(leaves)
            store.truncate(23)
            assert store.size == 23
            assert store.root() == tree.root(23)
            store.extend(leaves[23:])
            assert store.root() == tree.root(40)
            with pytest.raises(ValueError):
                store.truncate(41)

    def test_a_failed_write_is_rolled_back(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        leaves = _distinct_leaves(12, b"rollback")
        with MerkleStore(tmp_path) as store:
            store.extend(leaves[:11])
            real_write = merkle_store._write_all
            calls = []

            def failing_write(fd: int, data: bytes) -> None:
                calls.append(len(data))
                if len(calls) == 2:  # level 0 written, level 1 fails
                    raise OSError(28, "No space left on device")
                real_write(fd, data)

            monkeypatch.setattr(merkle_store, "_write_all", failing_write)
            with pytest.raises(OSError):
                store.append(leaves[11])
            monkeypatch.undo()
            assert store.size == 11
            assert (tmp_path / "level-00.bin").stat().st_size == 11 * HASH_SIZE
            store.append(leaves[11])
            assert store.root() == NaiveTree(leaves).root(12)

    def test_proofs_cost_logarithmic_node_reads(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        n = 5000
        with MerkleStore(tmp_path) as store:
            store.extend(_distinct_leaves(n, b"reads"))
            reads = []
            real_pread = os.pread

            def counting_pread(fd: int, length: int, offset: int) -> bytes:
                reads.append(length)
                return real_pread(fd, length, offset)

            monkeypatch.setattr(os, "pread", counting_pread)
            bound = 2 * n.bit_length() + 2
            for size in (n, 4096, 4097, 3333):
                for index in (0, size // 2, size - 1):
                    reads.clear()
                    store.inclusion_proof(index, size)
                    assert len(reads) <= bound, (index, size, len(reads))
                for m in (1, size // 3, size - 1):
                    reads.clear()
                    store.consistency_proof(m, size)
                    assert len(reads) <= bound, (m, size, len(reads))
                reads.clear()
                store.root(size)
                assert len(reads) == size.bit_count()

    def test_unknown_format_is_refused(self, tmp_path: Path) -> None:
        MerkleStore(tmp_path).close()
        (tmp_path / "FORMAT").write_bytes(b"merkle-store v999\n")
        with pytest.raises(MerkleStoreError, match="unknown format"):
            MerkleStore(tmp_path)

    def test_level_files_without_a_format_file_are_refused(self, tmp_path: Path) -> None:
        (tmp_path / "level-00.bin").write_bytes(b"\x00" * HASH_SIZE)
        with pytest.raises(MerkleStoreError):
            MerkleStore(tmp_path)

    def test_a_closed_store_refuses_use(self, tmp_path: Path) -> None:
        store = MerkleStore(tmp_path)
        store.close()
        with pytest.raises(MerkleStoreError, match="closed"):
            store.append(b"x")
        with pytest.raises(MerkleStoreError, match="closed"):
            store.root()
