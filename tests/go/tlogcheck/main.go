// tlogcheck checks this project's C2SP artefacts with Go's own transparency-log packages
// (golang.org/x/mod/sumdb/note and sumdb/tlog), none of whose code was written here.
// Built offline in GOPATH mode over Debian's golang-golang-x-mod-dev by tests/test_tlog_go.py.
//
//	tlogcheck note VKEY CHECKPOINT                   open the signed checkpoint with the verifier key
//	tlogcheck proof VKEY PROOF LEAFHEX               a .tlog-proof: its note, then the inclusion of the leaf
//	tlogcheck consistency VKEY OLD NEW PROOFHASHES   two signed checkpoints and the base64 consistency path
//
// Exit status 0: accepted; 1: refused (the reason on stderr); 2: bad usage.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

// open verifies a signed note with the one verifier key and reads its checkpoint body.
func open(vkey string, msg []byte) (checkpoint, error) {
	var cp checkpoint
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return cp, fmt.Errorf("verifier key: %w", err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return cp, fmt.Errorf("note: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	if len(lines) < 3 {
		return cp, errors.New("checkpoint: fewer than three lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return cp, errors.New("checkpoint: bad tree size")
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return cp, errors.New("checkpoint: bad root hash")
	}
	cp.origin, cp.size = lines[0], size
	copy(cp.root[:], root)
	return cp, nil
}

// hashes reads one base64 hash per line, strictly (canonical padding bits): a line that decodes to the same
// bytes but is not the bytes we wrote is refused, as our own parser refuses it.
func hashes(lines []string) ([]tlog.Hash, error) {
	var out []tlog.Hash
	for _, line := range lines {
		raw, err := base64.StdEncoding.Strict().DecodeString(line)
		if err != nil || len(raw) != tlog.HashSize {
			return nil, fmt.Errorf("bad hash line %q", line)
		}
		var h tlog.Hash
		copy(h[:], raw)
		out = append(out, h)
	}
	return out, nil
}

// proof reads a c2sp.org/tlog-proof@v1 and checks the leaf's inclusion under its signed checkpoint.
func proof(vkey string, msg []byte, leafHex string) error {
	head, cpText, ok := bytes.Cut(msg, []byte("\n\n"))
	if !ok {
		return errors.New("tlog-proof: no empty line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" {
		return errors.New("tlog-proof: bad header")
	}
	lines = lines[1:]
	if len(lines) > 0 && strings.HasPrefix(lines[0], "extra ") {
		lines = lines[1:]
	}
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "index ") {
		return errors.New("tlog-proof: no index line")
	}
	index, err := strconv.ParseInt(strings.TrimPrefix(lines[0], "index "), 10, 64)
	if err != nil {
		return errors.New("tlog-proof: bad index")
	}
	path, err := hashes(lines[1:])
	if err != nil {
		return fmt.Errorf("tlog-proof: %w", err)
	}
	cp, err := open(vkey, cpText)
	if err != nil {
		return err
	}
	leaf, err := hex.DecodeString(leafHex)
	if err != nil {
		return errors.New("leaf: not hex")
	}
	if err := tlog.CheckRecord(tlog.RecordProof(path), cp.size, cp.root, index, tlog.RecordHash(leaf)); err != nil {
		return fmt.Errorf("inclusion: %w", err)
	}
	fmt.Printf("ok: leaf %d of %s size %d\n", index, cp.origin, cp.size)
	return nil
}

func consistency(vkey string, oldMsg, newMsg, proofText []byte) error {
	old, err := open(vkey, oldMsg)
	if err != nil {
		return fmt.Errorf("old %w", err)
	}
	cur, err := open(vkey, newMsg)
	if err != nil {
		return fmt.Errorf("new %w", err)
	}
	if old.origin != cur.origin {
		return errors.New("the two checkpoints are of different logs")
	}
	var lines []string // one base64 hash per line, each ending in a newline; none for equal sizes
	if text := string(proofText); text != "" {
		if !strings.HasSuffix(text, "\n") {
			return errors.New("consistency proof: the last line does not end in a newline")
		}
		lines = strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	}
	path, err := hashes(lines)
	if err != nil {
		return fmt.Errorf("consistency proof: %w", err)
	}
	if err := tlog.CheckTree(tlog.TreeProof(path), cur.size, cur.root, old.size, old.root); err != nil {
		return fmt.Errorf("consistency: %w", err)
	}
	fmt.Printf("ok: %s size %d extends size %d\n", cur.origin, cur.size, old.size)
	return nil
}

func read(name string) []byte {
	data, err := os.ReadFile(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	return data
}

func main() {
	args := os.Args[1:]
	var err error
	switch {
	case len(args) == 3 && args[0] == "note":
		var cp checkpoint
		if cp, err = open(string(read(args[1])), read(args[2])); err == nil {
			fmt.Printf("ok: %s size %d\n", cp.origin, cp.size)
		}
	case len(args) == 4 && args[0] == "proof":
		err = proof(string(read(args[1])), read(args[2]), args[3])
	case len(args) == 5 && args[0] == "consistency":
		err = consistency(string(read(args[1])), read(args[2]), read(args[3]), read(args[4]))
	default:
		fmt.Fprintln(os.Stderr, "usage: tlogcheck note VKEY CP | proof VKEY PROOF LEAFHEX | consistency VKEY OLD NEW PROOF")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
