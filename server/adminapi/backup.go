package adminapi

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strconv"
	"strings"
)

// A backup file (latch snapshot save) is
//
//	latch-backup-1\n
//	{BackupInfo as JSON, without Size and SHA256}\n
//	the namespace snapshot (its own format, CRC-32C at the end)
//	\nsha256 <64 hex digits> size <20 digits>\n
//
// The trailer's SHA-256 covers every byte before it, and size counts the
// namespace snapshot's bytes: a truncated or altered file is refused before
// anything reads the data.
const backupMagic = "latch-backup-1\n"

// trailerLen is the fixed length of the trailer.
var trailerLen = len(fmt.Sprintf("\nsha256 %064x size %020d\n", make([]byte, 32), 0))

// ErrBadBackup marks a file that is not a complete, intact backup.
var ErrBadBackup = errors.New("latch: bad backup file")

// BackupInfo describes a backup.
type BackupInfo struct {
	// Index is the raft index (revision) of the last command the saved
	// state contains.
	Index uint64 `json:"index"`
	// Created is when the member started writing it (RFC 3339, UTC).
	Created string `json:"created"`
	// Member and Version name the member that wrote it and its build.
	Member  string         `json:"member"`
	Version string         `json:"version"`
	Members []MemberStatus `json:"members,omitempty"` // the cluster then
	// Size is the namespace snapshot's length in bytes and SHA256 the hex
	// digest of the file before the trailer; both come from the trailer.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// BackupWriter writes a backup: the header at creation, then the namespace
// snapshot through Write, then the trailer at Close.
type BackupWriter struct {
	w    io.Writer
	sum  hash.Hash
	size int64
	err  error
}

// NewBackupWriter writes the header describing info (Size and SHA256 are
// filled in by Close).
func NewBackupWriter(w io.Writer, info BackupInfo) (*BackupWriter, error) {
	info.Size, info.SHA256 = 0, ""
	head, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	bw := &BackupWriter{w: w, sum: sha256.New()}
	if _, err := bw.write([]byte(backupMagic)); err != nil {
		return nil, err
	}
	if _, err := bw.write(append(head, '\n')); err != nil {
		return nil, err
	}
	return bw, nil
}

func (bw *BackupWriter) write(p []byte) (int, error) {
	if bw.err != nil {
		return 0, bw.err
	}
	n, err := bw.w.Write(p)
	bw.sum.Write(p[:n])
	bw.err = err
	return n, err
}

// Write adds namespace snapshot bytes.
func (bw *BackupWriter) Write(p []byte) (int, error) {
	n, err := bw.write(p)
	bw.size += int64(n)
	return n, err
}

// Close writes the trailer (it does not close the underlying writer).
func (bw *BackupWriter) Close() error {
	if bw.err != nil {
		return bw.err
	}
	_, err := fmt.Fprintf(bw.w, "\nsha256 %x size %020d\n", bw.sum.Sum(nil), bw.size)
	return err
}

// ReadBackup checks the backup at path whole (magic, header, length,
// SHA-256) and returns its description and a reader of its namespace
// snapshot, positioned at the start; close it when done.
func ReadBackup(path string) (BackupInfo, io.ReadCloser, error) {
	var info BackupInfo
	f, err := os.Open(path)
	if err != nil {
		return info, nil, err
	}
	fail := func(format string, a ...any) (BackupInfo, io.ReadCloser, error) {
		f.Close()
		return info, nil, fmt.Errorf("%w: %s: %s", ErrBadBackup, path, fmt.Sprintf(format, a...))
	}
	fi, err := f.Stat()
	if err != nil {
		return fail("%v", err)
	}
	total := fi.Size()
	if total < int64(len(backupMagic)+trailerLen) {
		return fail("too short (%d bytes): not a backup, or truncated", total)
	}
	trailer := make([]byte, trailerLen)
	if _, err := f.ReadAt(trailer, total-int64(trailerLen)); err != nil {
		return fail("read trailer: %v", err)
	}
	var sum string
	var size int64
	fields := strings.Fields(string(trailer))
	if len(fields) != 4 || fields[0] != "sha256" || fields[2] != "size" || len(fields[1]) != 64 {
		return fail("no trailer: truncated or not a backup")
	}
	sum = fields[1]
	if size, err = strconv.ParseInt(fields[3], 10, 64); err != nil {
		return fail("bad size in trailer")
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, total-int64(trailerLen))); err != nil {
		return fail("read: %v", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fail("checksum mismatch (sha256 %s, trailer says %s): the file is damaged", got, sum)
	}
	br := bufio.NewReader(io.NewSectionReader(f, 0, total-int64(trailerLen)))
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != backupMagic {
		return fail("not a latch backup (bad magic)")
	}
	head, err := br.ReadBytes('\n')
	if err != nil {
		return fail("header: %v", err)
	}
	if err := json.Unmarshal(head, &info); err != nil {
		return fail("header: %v", err)
	}
	info.Size, info.SHA256 = size, sum
	dataStart := int64(len(backupMagic) + len(head))
	if dataStart+size != total-int64(trailerLen) {
		return fail("size %d in trailer does not match the file", size)
	}
	return info, readCloser{io.NewSectionReader(f, dataStart, size), f}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}
