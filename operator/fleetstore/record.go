package fleetstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slipway-dev/slipway/internal/fleetrecord"
	"github.com/slipway-dev/slipway/internal/fleetswitch"
)

// Load reads the stored fleet record and merges in the failures the Nodes' marks record: what a
// leader starts from, before its first admission. A new leader rebuilds the same memory its
// predecessor had (the stored record plus the marks it had not written yet). With no stored record
// yet (the first leader of this version) the resumes the fleet switch recorded before the record
// existed are taken over.
func (s *Store) Load(marks []fleetrecord.Failure) {
	cm := s.recordConfigMap()
	stored, broken := decodeRecord(cm)
	vers, versBroken := decodeVersions(cm)
	if versBroken != "" {
		s.cfg.Log.Error(errors.New(versBroken), "the fleet's versions cannot be read: nodes asking for a version are held until it is mended")
	}
	if cm == nil || strings.TrimSpace(cm.Data[fleetrecord.Key]) == "" {
		sw := s.Switch()
		const by = "ConfigMap " + fleetswitch.ConfigMapName + " (before the fleet record)"
		if !sw.FailuresResetAt.IsZero() {
			stored.AddResume(fleetrecord.Resume{By: by, At: sw.FailuresResetAt})
		}
		for v, at := range sw.VersionsResumed {
			stored.AddResume(fleetrecord.Resume{Version: v, By: by, At: at})
		}
	}
	for _, f := range marks {
		stored.AddFailure(f)
	}
	stored = s.withoutFuture(stored)
	s.mu.Lock()
	s.rec.Merge(stored)
	s.vers.Merge(vers)
	s.recBroken, s.versBroken = broken, versBroken
	s.mu.Unlock()
}

// See records that node staged version at at: the first sighting of a version is kept (a pool's
// minimum age counts from it) and written with the record.
func (s *Store) See(version, node string, at time.Time) {
	s.mu.Lock()
	changed := s.vers.See(version, node, at)
	s.mu.Unlock()
	if changed {
		s.cfg.OnMemory()
		s.cfg.OnSync(0)
	}
}

// withoutFuture drops the resumes of rec dated after this operator's clock plus
// fleetrecord.MaxResumeSkew, saying so: they are not taken into memory, so the record written next
// no longer has them (the log keeps what they said).
func (s *Store) withoutFuture(rec fleetrecord.Record) fleetrecord.Record {
	rec, future := rec.DropFuture(s.cfg.Now().Add(fleetrecord.MaxResumeSkew))
	for _, x := range future {
		s.cfg.Log.Error(errors.New("resume dated in the future"), "a resume in the fleet record is dated after this operator's clock; ignored and removed (resume again: kubectl slipway resume)",
			"version", x.Version, "by", x.By, "at", x.At, "why", x.Why, "limit", fleetrecord.MaxResumeSkew)
	}
	return rec
}

// recordConfigMap is the fleet record's ConfigMap (nil: none yet, or no namespace): the informer's, or
// this leader's own last write when that is newer (the informer trails it; a write on the older one
// would only conflict).
func (s *Store) recordConfigMap() *corev1.ConfigMap {
	if s.records == nil {
		return nil
	}
	cm, err := s.records.ConfigMaps(s.cfg.Namespace).Get(fleetrecord.ConfigMapName)
	if err != nil {
		cm = nil
	}
	s.mu.Lock()
	own := s.recWritten
	s.mu.Unlock()
	if own != nil && (cm == nil || newerRV(own.ResourceVersion, cm.ResourceVersion)) {
		return own
	}
	return cm
}

// newerRV reports whether resourceVersion a is newer than b (both etcd revisions; an unreadable one is
// not newer).
func newerRV(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}

// decodeVersions reads the versions document in cm (nil or none: empty), and why it cannot ("" it can).
func decodeVersions(cm *corev1.ConfigMap) (fleetrecord.Versions, string) {
	if cm == nil {
		return fleetrecord.Versions{}, ""
	}
	v, err := fleetrecord.DecodeVersions(cm.Data[fleetrecord.VersionsKey])
	if err != nil {
		return fleetrecord.Versions{}, fmt.Sprintf("ConfigMap %s/%s key %s: %v", cm.Namespace, cm.Name, fleetrecord.VersionsKey, err)
	}
	return v, ""
}

// decodeRecord reads the record in cm (nil: none yet, the empty record), and why it cannot ("" it can).
func decodeRecord(cm *corev1.ConfigMap) (fleetrecord.Record, string) {
	if cm == nil {
		return fleetrecord.Record{}, ""
	}
	r, err := fleetrecord.Decode(cm.Data[fleetrecord.Key])
	if err != nil {
		return fleetrecord.Record{}, fmt.Sprintf("ConfigMap %s/%s: %v; mend or restore it (never delete it: it holds the fleet's halts and failures)", cm.Namespace, cm.Name, err)
	}
	return r, ""
}

// WriteRecord stores the fleet's memory when the stored record lacks any of it: merged onto the
// record as stored (a person's resume written meanwhile is kept), conditional on the resourceVersion
// it was read at, so no write of another leader or a person is ever lost. The informer's copy may
// trail this leader's own last write: a conflict reads the live object and merges again (so do two
// writes of this leader at once: the fleet sync's and a finishing node's). Unless now, what lacks
// only proofs is left to a later sync: it returns lazy true then.
func (s *Store) WriteRecord(ctx context.Context, now bool) (lazy bool, err error) {
	if s.cfg.Namespace == "" {
		return false, nil
	}
	stored, err := s.storeConfigMap(ctx, fleetrecord.ConfigMapName, s.recordConfigMap(), false, func(cm *corev1.ConfigMap) (map[string]string, error) {
		raw, broken := decodeRecord(cm)
		rec := s.withoutFuture(raw)
		vers, versBroken := decodeVersions(cm)
		s.mu.Lock()
		wasBroken := s.recBroken != "" || s.versBroken != ""
		s.recBroken, s.versBroken = broken, versBroken
		learned := s.rec.Merge(rec) // a person's resume, another leader's entries
		learned = versBroken == "" && s.vers.Merge(vers) || learned
		s.rec.Bound()
		want, wantVers := s.rec.Encode(), s.vers.Encode()
		onlyProofs := s.rec.SameButProofs(raw) // a dropped resume is more than proofs: written now
		haveVers := len(s.vers.Seen) > 0 || len(s.vers.Halts) > 0
		s.mu.Unlock()
		if learned || wasBroken != (broken != "" || versBroken != "") {
			s.cfg.OnRelease() // a resume may release waiting nodes; a broken record holds them
		}
		if broken != "" {
			return nil, errors.New("not writing the fleet record over one it cannot read: " + broken)
		}
		if versBroken != "" {
			s.cfg.Log.Error(errors.New(versBroken), "not writing the fleet's versions over a document it cannot read; nodes asking for a version are held until it is mended")
		}
		out := map[string]string{}
		lazy = false
		switch {
		case cm != nil && cm.Data[fleetrecord.Key] == want:
		case cm != nil && !now && onlyProofs:
			lazy = true
		default:
			out[fleetrecord.Key] = want
		}
		if versBroken == "" && haveVers && (cm == nil || cm.Data[fleetrecord.VersionsKey] != wantVers) {
			out[fleetrecord.VersionsKey] = wantVers
		}
		return out, nil
	})
	s.mu.Lock()
	switch {
	case err != nil:
		s.recWritten = nil // the informer's copy is the best known then
	case stored != nil && (s.recWritten == nil || !newerRV(s.recWritten.ResourceVersion, stored.ResourceVersion)):
		s.recWritten = stored // a write of this leader that finished first may be newer: it stays
	}
	s.mu.Unlock()
	return lazy, err
}
