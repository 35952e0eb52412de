// Package nodeconfig brings a running node in line with an Ignition config, such as the butane/
// snippets: it writes the files, directories and links the config declares and masks, enables or
// disables its systemd units — what Ignition would have done at first boot, done idempotently on a
// node that has been running for years. Plan first, change second: a config it cannot carry out
// completely is refused before anything on the node changes.
package nodeconfig

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/coreos/ignition/v2/config/v3_6/types"
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

// unitDir is where the admin's unit files live, and where Ignition writes units with contents.
const unitDir = "/etc/systemd/system"

// Compute compares the node with the config and returns the steps that bring it in line. root is
// where the node's filesystem is (/ on the node; the DaemonSet mounts it elsewhere); now names the
// backups of files it replaces. Compute itself changes nothing.
func Compute(ctx context.Context, cfg types.Config, root string, sd Systemd, now time.Time) (*Plan, error) {
	r, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	backup := ".slipway-backup-" + now.UTC().Format("20060102T150405Z")
	es, err := entries(cfg, r, &accounts{root: r})
	if err != nil {
		return nil, err
	}
	storage, err := planStorage(r, es, backup)
	if err != nil {
		return nil, err
	}
	p := &Plan{Steps: storage.steps}
	unitFiles := storage.unitFiles
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
				// Resolved inside the root like every other path; Parse made sure name is a plain
				// file name.
				etc := path.Join(unitDir, name)
				rel, err := r.resolve(etc)
				if err != nil {
					return nil, err
				}
				if n, err := storage.v.get(rel); err != nil {
					return nil, err
				} else if n.kind == kindFile {
					p.add(fmt.Sprintf("move %s aside to %s (a unit file there cannot be masked)", etc, name+backup), "", func(context.Context) error {
						return r.moveAside(rel, backup)
					})
				}
				p.add(fmt.Sprintf("mask %s (unit file %s)", name, orNone(fileState)), "", func(ctx context.Context) error { return sd.Mask(ctx, name) })
				unitFiles = true
			}
		case u.Mask != nil && !*u.Mask && fileState == "masked" && (u.Enabled == nil || !*u.Enabled):
			// mask: false unmasks, as Ignition does (an enabled unit is unmasked below anyway).
			p.add(fmt.Sprintf("unmask %s (the config says mask: false)", name), "", func(ctx context.Context) error { return sd.Unmask(ctx, name) })
			unitFiles = true
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

func (p *Plan) add(summary, diff string, do func(ctx context.Context) error) {
	p.Steps = append(p.Steps, Step{Summary: summary, Diff: diff, do: do})
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
