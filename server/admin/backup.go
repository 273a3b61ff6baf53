package admin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/latch-io/latch/server/adminapi"
)

// Backups (latch snapshot save / restore): the save streams the leader's
// namespace after a linearizable read barrier in adminapi's checksummed
// file format; the restore takes such a file into a fresh cluster
// (Backups.RestoreBackup, whose doc in package server says what the
// restored cluster holds).

// maxBackupUpload bounds a restore upload.
const maxBackupUpload = 8 << 30

func (e *endpoint) handleBackupSave(w http.ResponseWriter, r *http.Request) {
	if e.redirectToLeader(w, r) {
		return
	}
	if err := e.m.LinearizableRead(r.Context()); err != nil {
		e.writeError(w, err)
		return
	}
	snap, err := e.m.OpenBackup()
	if err != nil {
		e.writeError(w, err)
		return
	}
	defer snap.Release()
	members, _ := e.m.Members()
	info := adminapi.BackupInfo{
		Index: snap.Index(), Created: time.Now().UTC().Format(time.RFC3339Nano),
		Member: e.cfg.ID, Version: adminapi.ThisBuild().String(), Members: members,
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Latch-Index", fmt.Sprint(info.Index))
	bw, err := adminapi.NewBackupWriter(w, info)
	if err == nil {
		_, err = snap.WriteTo(bw)
	}
	if err == nil {
		err = bw.Close()
	}
	if err != nil {
		// The status line is gone; the client sees a file without a
		// valid trailer and refuses it.
		e.cfg.Log.Warn("backup download failed", "err", err)
		return
	}
	e.cfg.Log.Info("backup saved", "index", info.Index, "remote", r.RemoteAddr)
}

func (e *endpoint) handleBackupRestore(w http.ResponseWriter, r *http.Request) {
	if e.redirectToLeader(w, r) {
		return
	}
	// The upload goes to a file first: raft's restore must not start on
	// a stream that might end early or be damaged.
	f, err := os.CreateTemp(e.cfg.DataDir, "restore-*.backup")
	if err != nil {
		e.writeError(w, err)
		return
	}
	defer os.Remove(f.Name())
	_, err = io.Copy(f, http.MaxBytesReader(w, r.Body, maxBackupUpload))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		e.writeError(w, fmt.Errorf("%w: upload: %v", e.cfg.Errors.BadRequest, err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Minute)
	defer cancel()
	info, err := e.m.RestoreBackup(ctx, f.Name(), r.URL.Query().Get("force") == "true")
	if err != nil {
		e.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}
