// Package nodeconfig brings a running node in line with an Ignition config, such as the butane/
// snippets: it writes the files, directories and links the config declares and masks, enables or
// disables its systemd units — what Ignition would have done at first boot, done idempotently on a
// node that has been running for years. Plan first, change second: a config it cannot carry out
// completely is refused before anything on the node changes.
package nodeconfig

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/vincent-petithory/dataurl"
)

// Systemd is what the plan needs from the service manager. The real one talks to systemd over D-Bus
// (NewSystemd); unit tests use a map.
type Systemd interface {
	UnitState(ctx context.Context, name string) (UnitState, error)
	Reload(ctx context.Context) error
	Mask(ctx context.Context, name string) error
	Unmask(ctx context.Context, name string) error
	Enable(ctx context.Context, name string) error
	Disable(ctx context.Context, name string) error
	Start(ctx context.Context, name string) error
	Stop(ctx context.Context, name string) error
}

// UnitState is what systemd says of a unit.
type UnitState struct {
	File   string // unit file state on disk: "enabled", "disabled", "masked", "static", "" without a unit file
	Active string // "active", "inactive", "failed", ...
}

// Step is one change to the node.
type Step struct {
	Summary string // what and why, one line
	Diff    string // unified diff for file contents, if any
	do      func(ctx context.Context) error
}

// Plan is every change needed, in the order they are applied.
type Plan struct {
	Steps []Step
}

// Parse reads an Ignition config of spec 3.0 to 3.4 (what Butane's flatcar variant emits) and
// refuses the sections a running node cannot take: disks, filesystems, users, kernel arguments,
// merged or replaced configs, appends and remote contents. Those belong to first boot.
func Parse(raw []byte) (types.Config, error) {
	cfg, rpt, err := v34.Parse(raw)
	if err != nil {
		if len(rpt.Entries) > 0 {
			return cfg, fmt.Errorf("not a valid Ignition config: %v\n%s", err, rpt)
		}
		return cfg, fmt.Errorf("not a valid Ignition config: %v", err)
	}
	var unsupported []string
	add := func(cond bool, what string) {
		if cond {
			unsupported = append(unsupported, what)
		}
	}
	add(len(cfg.Ignition.Config.Merge) > 0 || cfg.Ignition.Config.Replace.Source != nil, "ignition.config merge/replace (flatten the config first, e.g. with butane --files-dir)")
	add(len(cfg.Passwd.Users) > 0 || len(cfg.Passwd.Groups) > 0, "passwd users/groups")
	add(len(cfg.Storage.Disks) > 0 || len(cfg.Storage.Filesystems) > 0 || len(cfg.Storage.Raid) > 0 || len(cfg.Storage.Luks) > 0, "storage disks/filesystems/raid/luks")
	add(len(cfg.KernelArguments.ShouldExist) > 0 || len(cfg.KernelArguments.ShouldNotExist) > 0, "kernelArguments")
	for _, f := range cfg.Storage.Files {
		add(len(f.Append) > 0, "storage.files["+f.Path+"].append")
		add(!rootOwned(f.Node), "storage.files["+f.Path+"] owned by another user or group")
	}
	for _, d := range cfg.Storage.Directories {
		add(!rootOwned(d.Node), "storage.directories["+d.Path+"] owned by another user or group")
	}
	for _, l := range cfg.Storage.Links {
		add(l.Hard != nil && *l.Hard, "storage.links["+l.Path+"] hard link")
	}
	if len(unsupported) > 0 {
		return cfg, fmt.Errorf("the config uses what only first boot can do, nothing applied: %s", strings.Join(unsupported, "; "))
	}
	return cfg, nil
}

// unitDir is where the admin's unit files live, and where Ignition writes units with contents.
const unitDir = "/etc/systemd/system"

func rootOwned(n types.Node) bool {
	ok := func(id *int, name *string) bool {
		return (id == nil || *id == 0) && (name == nil || *name == "" || *name == "root")
	}
	return ok(n.User.ID, n.User.Name) && ok(n.Group.ID, n.Group.Name)
}

// Compute compares the node with the config and returns the steps that bring it in line. root is
// where the node's filesystem is (/ on the node; the DaemonSet mounts it elsewhere); now names the
// backups of files it replaces. Compute itself changes nothing.
func Compute(ctx context.Context, cfg types.Config, root string, sd Systemd, now time.Time) (*Plan, error) {
	p := &Plan{}
	backup := ".slipway-backup-" + now.UTC().Format("20060102T150405Z")
	for _, d := range cfg.Storage.Directories {
		if err := p.directory(filepath.Join(root, d.Path), d.Path, mode(d.Mode, 0o755)); err != nil {
			return nil, err
		}
	}
	unitFiles := false
	for _, f := range cfg.Storage.Files {
		data, err := contents(f.Contents)
		if err != nil {
			return nil, fmt.Errorf("storage.files[%s]: %w", f.Path, err)
		}
		overwrite := f.Overwrite != nil && *f.Overwrite
		if _, err := p.file(filepath.Join(root, f.Path), f.Path, data, mode(f.Mode, 0o644), overwrite, backup); err != nil {
			return nil, err
		}
	}
	for _, l := range cfg.Storage.Links {
		if l.Target == nil {
			return nil, fmt.Errorf("storage.links[%s]: no target", l.Path)
		}
		if err := p.link(filepath.Join(root, l.Path), l.Path, *l.Target, l.Overwrite != nil && *l.Overwrite); err != nil {
			return nil, err
		}
	}
	for _, u := range cfg.Systemd.Units {
		if u.Contents != nil {
			changed, err := p.file(filepath.Join(root, unitDir, u.Name), path.Join(unitDir, u.Name), []byte(*u.Contents), 0o644, true, backup)
			if err != nil {
				return nil, err
			}
			unitFiles = unitFiles || changed
		}
		for _, d := range u.Dropins {
			if d.Contents == nil {
				continue
			}
			rel := path.Join(unitDir, u.Name+".d", d.Name)
			changed, err := p.file(filepath.Join(root, rel), rel, []byte(*d.Contents), 0o644, true, backup)
			if err != nil {
				return nil, err
			}
			unitFiles = unitFiles || changed
		}
	}
	var starts []Step
	for _, u := range cfg.Systemd.Units {
		name := u.Name
		st, err := sd.UnitState(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("systemd unit %s: %w", name, err)
		}
		fileState, active := st.File, st.Active
		running := active == "active" || active == "activating" || active == "reloading"
		switch {
		case u.Mask != nil && *u.Mask:
			if running {
				p.add(fmt.Sprintf("stop %s (%s; it is masked by the config)", name, active), "", func(ctx context.Context) error { return sd.Stop(ctx, name) })
			}
			if fileState != "masked" {
				// systemd refuses to mask a unit whose file is in /etc/systemd/system (it would have to
				// replace it): that file is the admin's, so it is moved aside, not lost.
				etc := path.Join(unitDir, name)
				full := filepath.Join(root, etc)
				if fi, err := os.Lstat(full); err == nil && fi.Mode().IsRegular() {
					p.add(fmt.Sprintf("move %s aside to %s (a unit file there cannot be masked)", etc, name+backup), "", func(context.Context) error {
						return os.Rename(full, full+backup)
					})
				}
				p.add(fmt.Sprintf("mask %s (unit file %s)", name, orNone(fileState)), "", func(ctx context.Context) error { return sd.Mask(ctx, name) })
				unitFiles = true
			}
		case u.Enabled != nil && *u.Enabled:
			if fileState == "masked" {
				p.add(fmt.Sprintf("unmask %s (the config enables it)", name), "", func(ctx context.Context) error { return sd.Unmask(ctx, name) })
				unitFiles = true
			}
			if fileState != "enabled" && fileState != "static" {
				p.add(fmt.Sprintf("enable %s (unit file %s)", name, orNone(fileState)), "", func(ctx context.Context) error { return sd.Enable(ctx, name) })
				unitFiles = true
			}
			if !running {
				starts = append(starts, Step{Summary: fmt.Sprintf("start %s (%s)", name, orNone(active)), do: func(ctx context.Context) error { return sd.Start(ctx, name) }})
			}
		case u.Enabled != nil && !*u.Enabled:
			if running {
				p.add(fmt.Sprintf("stop %s (%s; the config disables it)", name, active), "", func(ctx context.Context) error { return sd.Stop(ctx, name) })
			}
			if fileState == "enabled" {
				p.add(fmt.Sprintf("disable %s", name), "", func(ctx context.Context) error { return sd.Disable(ctx, name) })
				unitFiles = true
			}
		}
	}
	// systemd sees unit file changes (written, masked, enabled, ...) after a reload, as systemctl
	// does after each of them; then units start, last: they may need the files, and what they
	// conflict with stopped.
	if unitFiles {
		p.add("reload systemd (unit files changed)", "", sd.Reload)
	}
	p.Steps = append(p.Steps, starts...)
	return p, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func mode(m *int, def fs.FileMode) fs.FileMode {
	if m == nil {
		return def
	}
	return fs.FileMode(*m) & fs.ModePerm
}

func (p *Plan) add(summary, diff string, do func(ctx context.Context) error) {
	p.Steps = append(p.Steps, Step{Summary: summary, Diff: diff, do: do})
}

// contents decodes a file's inline contents (data: URL, optionally gzip-compressed) and checks its
// verification hash. Remote sources are refused: a running node should not fetch what it then
// writes as root; put the contents inline (Butane's `local:` does).
func contents(r types.Resource) ([]byte, error) {
	if r.Source == nil || *r.Source == "" {
		return []byte{}, nil
	}
	if !strings.HasPrefix(*r.Source, "data:") {
		return nil, fmt.Errorf("contents from %q: only inline (data:) contents can be applied to a running node", *r.Source)
	}
	u, err := dataurl.DecodeString(*r.Source)
	if err != nil {
		return nil, fmt.Errorf("contents: %w", err)
	}
	data := u.Data
	if r.Compression != nil && *r.Compression != "" {
		if *r.Compression != "gzip" {
			return nil, fmt.Errorf("compression %q: only gzip is known", *r.Compression)
		}
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("gzip contents: %w", err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("gzip contents: %w", err)
		}
	}
	if h := r.Verification.Hash; h != nil && *h != "" {
		algo, want, _ := strings.Cut(*h, "-")
		var sum hash.Hash
		switch algo {
		case "sha512":
			sum = sha512.New()
		case "sha256":
			sum = sha256.New()
		default:
			return nil, fmt.Errorf("verification hash %q: unknown algorithm", *h)
		}
		sum.Write(data)
		if got := hex.EncodeToString(sum.Sum(nil)); got != want {
			return nil, fmt.Errorf("verification hash mismatch: contents hash to %s-%s", algo, got)
		}
	}
	return data, nil
}

func (p *Plan) directory(full, shown string, m fs.FileMode) error {
	st, err := os.Stat(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.add(fmt.Sprintf("create directory %s (mode %04o)", shown, m), "", func(context.Context) error {
			if err := os.MkdirAll(full, m); err != nil {
				return err
			}
			return os.Chmod(full, m)
		})
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s exists and is not a directory; nothing applied", shown)
	case st.Mode().Perm() != m:
		p.add(fmt.Sprintf("chmod %s %04o (was %04o)", shown, m, st.Mode().Perm()), "", func(context.Context) error { return os.Chmod(full, m) })
	}
	return nil
}

// file plans writing data to full. A file that exists with other contents is replaced only when
// the config says overwrite (as Ignition would), and its old contents are kept beside it.
func (p *Plan) file(full, shown string, data []byte, m fs.FileMode, overwrite bool, backup string) (bool, error) {
	old, err := os.ReadFile(full)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("%s: %w", shown, err)
	}
	if exists {
		st, err := os.Lstat(full)
		if err != nil {
			return false, err
		}
		if !st.Mode().IsRegular() {
			return false, fmt.Errorf("%s exists and is not a regular file; nothing applied", shown)
		}
		if bytes.Equal(old, data) {
			if st.Mode().Perm() != m {
				p.add(fmt.Sprintf("chmod %s %04o (was %04o)", shown, m, st.Mode().Perm()), "", func(context.Context) error { return os.Chmod(full, m) })
			}
			return false, nil
		}
		if !overwrite {
			return false, fmt.Errorf("%s exists with other contents and the config does not say overwrite: true; nothing applied", shown)
		}
	}
	diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(old)), B: difflib.SplitLines(string(data)),
		FromFile: shown + " (node)", ToFile: shown + " (config)", Context: 2,
	})
	summary := fmt.Sprintf("write %s (mode %04o, new file)", shown, m)
	if exists {
		summary = fmt.Sprintf("write %s (mode %04o; the old one is kept as %s)", shown, m, path.Base(shown)+backup)
	}
	p.add(summary, diff, func(context.Context) error {
		if exists {
			if err := os.WriteFile(full+backup, old, 0o600); err != nil {
				return fmt.Errorf("keeping %s: %w", shown, err)
			}
		}
		return writeAtomic(full, data, m)
	})
	return true, nil
}

func (p *Plan) link(full, shown, target string, overwrite bool) error {
	cur, err := os.Readlink(full)
	if err == nil && cur == target {
		return nil
	}
	if _, statErr := os.Lstat(full); statErr == nil && !overwrite {
		return fmt.Errorf("%s exists and the config does not say overwrite: true; nothing applied", shown)
	}
	p.add(fmt.Sprintf("link %s -> %s", shown, target), "", func(context.Context) error {
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		tmp := full + ".slipway-tmp"
		_ = os.Remove(tmp)
		if err := os.Symlink(target, tmp); err != nil {
			return err
		}
		return os.Rename(tmp, full)
	})
	return nil
}

// writeAtomic replaces a file so that a crash leaves either the old or the new one, never half.
func writeAtomic(full string, data []byte, m fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(full), "."+filepath.Base(full)+".slipway-tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(m); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), full)
}

// Apply carries out the steps in order and stops at the first that fails, saying which.
func (p *Plan) Apply(ctx context.Context) error {
	for i, s := range p.Steps {
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("step %d of %d (%s): %w", i+1, len(p.Steps), s.Summary, err)
		}
	}
	return nil
}

// String is the plan as a person reads it: one line per step, file diffs indented below.
func (p *Plan) String() string {
	if len(p.Steps) == 0 {
		return "the node is in line with the config: nothing to do\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d change(s):\n", len(p.Steps))
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "  - %s\n", s.Summary)
		for _, l := range strings.SplitAfter(s.Diff, "\n") {
			if l != "" {
				b.WriteString("      " + l)
			}
		}
		if s.Diff != "" && !strings.HasSuffix(s.Diff, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}
