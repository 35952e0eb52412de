package nodeconfig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_6/types"
	"github.com/pmezard/go-difflib/difflib"
	"golang.org/x/sys/unix"
)

// What Ignition does with storage.files, .directories and .links at first boot
// (configuration-v3_*.md; internal/exec/stages/files in coreos/ignition), carried out on a running
// node so that a second run finds nothing to do:
//
//   - Every path is resolved before anything is written, inside the root (rootFS). Two entries
//     that land on one path are refused.
//   - Directories, files and symlinks are made shallowest first, hard links after them (so they can
//     point at files the config makes deeper down), unit files and drop-ins last.
//   - Missing parents are made 0755 (with the setgid bit and group of a setgid parent, as mkdir(2)
//     gives them), never with the leaf's mode.
//   - A node of the declared kind that is already there is kept: a directory keeps its contents
//     and, unless the config sets them, its mode and owner; a file without contents keeps its
//     contents, mode and owner; a symlink with the same target gets only the declared owner; a hard
//     link to the same inode is in line.
//   - A file with contents is in line when its contents are; it then has the declared mode and
//     owner, or those Ignition writes (0644, root) — it is the file Ignition would have written.
//   - Anything else in the way is refused without `overwrite: true` — other contents, another
//     symlink target, a node of another kind (a dangling symlink too) — and replaced with it.
//     Ignition deletes what it replaces; here it is kept beside as <name>.slipway-backup-<time>.
//   - A directory declared with `overwrite: true` is, for Ignition, deleted and made anew. A
//     running node's directory is replaced only when it is not already what that would leave: the
//     directory with Ignition's mode and owner holding exactly the nodes the config declares under
//     it, as the config declares them.
//   - Owners are ids, or names looked up in the root's account files (accounts); hard links have
//     none of their own. The mode is the whole mode, setuid, setgid and sticky included, set after
//     the owner because chown(2) clears setuid and setgid.

const (
	kindAbsent = ""
	kindFile   = "file"
	kindDir    = "dir"
	kindLink   = "link"  // symlink
	kindOther  = "other" // fifo, socket, device
	kindHard   = "hard"  // only an entry's kind: the node it makes is its target's
)

// entry is one of the config's files, directories or links, or a unit file or drop-in, with its
// path resolved inside the root.
type entry struct {
	kind      string
	decl      string // the path as the config says it, for messages
	rel       string // where it resolves inside the root
	overwrite bool
	mode      *uint32 // declared mode, all of it
	uid, gid  *int    // declared owner as ids
	data      []byte  // file contents; nil: the config declares none
	target    string  // a symlink's target as written; a hard link's target resolved
	unit      bool    // a unit file or drop-in: systemd needs a reload when it changes
}

func (e entry) shown() string {
	if e.rel == e.decl {
		return e.decl
	}
	return e.decl + " (" + e.rel + " inside the root)"
}

// entries resolves and orders everything the config writes, in Ignition's order.
func entries(cfg types.Config, r *rootFS, acct *accounts) ([]entry, error) {
	var nodes, hard, units []entry
	owned := func(e entry, n types.Node) (entry, error) {
		rel, err := r.resolve(n.Path)
		if err != nil {
			return e, err
		}
		e.decl, e.rel, e.overwrite = n.Path, rel, n.Overwrite != nil && *n.Overwrite
		if e.uid, e.gid, err = acct.owner(n.User.ID, n.User.Name, n.Group.ID, n.Group.Name); err != nil {
			return e, fmt.Errorf("%s: %w", n.Path, err)
		}
		return e, nil
	}
	for _, d := range cfg.Storage.Directories {
		e, err := owned(entry{kind: kindDir, mode: mode(d.Mode)}, d.Node)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, e)
	}
	for _, f := range cfg.Storage.Files {
		e, err := owned(entry{kind: kindFile, mode: mode(f.Mode)}, f.Node)
		if err != nil {
			return nil, err
		}
		if f.Contents.Source != nil {
			if e.data, err = contents(f.Contents); err != nil {
				return nil, fmt.Errorf("storage.files[%s]: %w", f.Path, err)
			}
		}
		nodes = append(nodes, e)
	}
	for _, l := range cfg.Storage.Links {
		if l.Target == nil {
			return nil, fmt.Errorf("storage.links[%s]: no target", l.Path)
		}
		if l.Hard != nil && *l.Hard {
			// A hard link has no owner of its own: Ignition ignores user and group there.
			rel, err := r.resolve(l.Path)
			if err != nil {
				return nil, err
			}
			// Ignition resolves a hard link's target as a path in the root (relative ones from /).
			target, err := r.resolve(path.Clean("/" + *l.Target))
			if err != nil {
				return nil, err
			}
			hard = append(hard, entry{kind: kindHard, decl: l.Path, rel: rel, overwrite: l.Overwrite != nil && *l.Overwrite, target: target})
			continue
		}
		e, err := owned(entry{kind: kindLink, target: *l.Target}, l.Node)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, e)
	}
	// Shallowest first; among equals, the config's order (directories, files, links).
	sort.SliceStable(nodes, func(i, j int) bool { return depth(nodes[i].rel) < depth(nodes[j].rel) })

	// Unit files and drop-ins, as Ignition writes them after the storage entries: replaced when
	// they differ, 0644, root's. A unit with empty contents is not written, an empty drop-in is.
	unitFile := func(p string, data string) error {
		rel, err := r.resolve(p)
		if err != nil {
			return err
		}
		units = append(units, entry{kind: kindFile, decl: p, rel: rel, overwrite: true, data: []byte(data), unit: true})
		return nil
	}
	for _, u := range cfg.Systemd.Units {
		for _, d := range u.Dropins {
			if d.Contents != nil {
				if err := unitFile(path.Join(unitDir, u.Name+".d", d.Name), *d.Contents); err != nil {
					return nil, err
				}
			}
		}
		if u.Contents != nil && *u.Contents != "" {
			if err := unitFile(path.Join(unitDir, u.Name), *u.Contents); err != nil {
				return nil, err
			}
		}
	}

	all := append(append(nodes, hard...), units...)
	seen := map[string]string{}
	for _, e := range all {
		if other, ok := seen[e.rel]; ok {
			return nil, fmt.Errorf("%s and %s are both at %s inside the root (after following symlinks); nothing applied", other, e.decl, e.rel)
		}
		seen[e.rel] = e.decl
		if e.rel == "/" && (e.kind != kindDir || e.overwrite) {
			return nil, fmt.Errorf("%s: will not replace the root itself", e.decl)
		}
	}
	return all, nil
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

func mode(m *int) *uint32 {
	if m == nil {
		return nil
	}
	v := uint32(*m) & 0o7777
	return &v
}

// vnode is what is at a path: on disk, or as the plan's earlier steps will leave it.
type vnode struct {
	kind     string
	mode     uint32 // & 07777
	uid, gid int
	target   string // symlink target
	data     []byte // planned file contents
	dev, ino uint64 // on disk
	hardTo   string // planned hard link: the path it links
	planned  bool   // made by the plan; a planned directory holds only what the plan puts in it
}

// view answers "what is at this path" for a plan: the plan's own changes first, the disk after.
type view struct {
	r    *rootFS
	over map[string]vnode
}

func (v *view) get(rel string) (vnode, error) {
	if n, ok := v.over[rel]; ok {
		return n, nil
	}
	for a := path.Dir(rel); a != "/" && a != "."; a = path.Dir(a) {
		if n, ok := v.over[a]; ok && (n.kind != kindDir || n.planned) {
			return vnode{}, nil // beneath a node the plan makes anew: nothing there yet
		}
	}
	return v.disk(rel)
}

func (v *view) disk(rel string) (vnode, error) {
	var st unix.Stat_t
	if err := unix.Lstat(v.r.host(rel), &st); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return vnode{}, nil
		}
		return vnode{}, &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	n := vnode{mode: st.Mode & 0o7777, uid: int(st.Uid), gid: int(st.Gid), dev: st.Dev, ino: st.Ino}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		n.kind = kindFile
	case unix.S_IFDIR:
		n.kind = kindDir
	case unix.S_IFLNK:
		n.kind, n.mode = kindLink, 0
		t, err := os.Readlink(v.r.host(rel))
		if err != nil {
			return vnode{}, err
		}
		n.target = t
	default:
		n.kind = kindOther
	}
	return n, nil
}

// fileData reads what a regular file holds, without following a symlink or blocking on a fifo
// that took its place.
func (v *view) fileData(rel string, n vnode) ([]byte, error) {
	if n.planned {
		return n.data, nil
	}
	f, err := os.OpenFile(v.r.host(rel), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// fresh is a node as mkdir(2)/open(2) make it in parent: this process's owner, or the group of
// a setgid parent (whose subdirectories inherit the setgid bit too).
func fresh(parent vnode, kind string, m uint32) vnode {
	n := vnode{kind: kind, mode: m, uid: os.Geteuid(), gid: os.Getegid(), planned: true}
	if parent.kind == kindDir && parent.mode&0o2000 != 0 {
		n.gid = parent.gid
		if kind == kindDir {
			n.mode |= 0o2000
		}
	}
	return n
}

// planner computes the steps for the storage entries against a view.
type planner struct {
	r      *rootFS
	v      *view
	backup string
	// replaceDirs are directories declared with overwrite that exist and are not what Ignition
	// would leave: they are replaced, the others kept. replaceAll replaces every one, listing
	// them in overwriteDirs.
	replaceDirs   map[string]bool
	replaceAll    bool
	overwriteDirs []string
	steps         []Step
	unitFiles     bool // a unit file or drop-in changes: systemd needs a reload
}

func (p *planner) add(summary, diff string, do func() error) {
	p.steps = append(p.steps, Step{Summary: summary, Diff: diff, do: func(context.Context) error { return do() }})
}

func (p *planner) refuse(e entry, format string, args ...any) error {
	return fmt.Errorf("%s: %s; nothing applied", e.shown(), fmt.Sprintf(format, args...))
}

// planStorage plans the entries. A directory declared with overwrite that exists is first
// assumed replaced, which gives Ignition's end state beneath it; where the disk already holds
// exactly that, the directory is kept and the plan made again.
func planStorage(r *rootFS, es []entry, backup string) (*planner, error) {
	first := &planner{r: r, v: &view{r: r, over: map[string]vnode{}}, backup: backup, replaceAll: true}
	if err := first.run(es); err != nil {
		return nil, err
	}
	replace := map[string]bool{}
	for _, d := range first.overwriteDirs {
		same, err := first.matches(d)
		if err != nil {
			return nil, err
		}
		replace[d] = !same
	}
	final := &planner{r: r, v: &view{r: r, over: map[string]vnode{}}, backup: backup, replaceDirs: replace}
	if err := final.run(es); err != nil {
		return nil, err
	}
	return final, nil
}

func (p *planner) run(es []entry) error {
	for _, e := range es {
		var err error
		switch e.kind {
		case kindDir:
			err = p.dir(e)
		case kindFile:
			err = p.file(e)
		case kindLink:
			err = p.symlink(e)
		case kindHard:
			err = p.hardlink(e)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parents plans the directories missing above rel, top down, as Ignition's MkdirAll makes them.
// It returns rel's parent as the plan leaves it, what the creating step runs first, and a note
// for that step's summary.
func (p *planner) parents(e entry) (vnode, func() error, string, error) {
	var missing []string
	var top vnode
	for a := path.Dir(e.rel); ; a = path.Dir(a) {
		n, err := p.v.get(a)
		if err != nil {
			return vnode{}, nil, "", err
		}
		if n.kind == kindDir {
			top = n
			break
		}
		if n.kind != kindAbsent {
			return vnode{}, nil, "", p.refuse(e, "%s is a %s, not a directory", a, describe(n))
		}
		if a == "/" {
			return vnode{}, nil, "", p.refuse(e, "the root directory is missing")
		}
		missing = append([]string{a}, missing...)
	}
	if len(missing) == 0 {
		return top, func() error { return nil }, "", nil
	}
	parent := top
	var modes []uint32
	for _, a := range missing {
		n := fresh(parent, kindDir, 0o755)
		p.v.over[a] = n
		modes = append(modes, n.mode)
		parent = n
	}
	mk := func() error {
		for i, a := range missing {
			if err := p.r.mkdir(a, modes[i], nil, nil); err != nil {
				return err
			}
		}
		return nil
	}
	return parent, mk, fmt.Sprintf("; first its parent directories %s, mode %04o", strings.Join(missing, ", "), modes[0]), nil
}

func (p *planner) parentOf(rel string) (vnode, error) { return p.v.get(path.Dir(rel)) }

func describe(n vnode) string {
	switch n.kind {
	case kindLink:
		return "symlink to " + n.target
	case kindDir:
		return "directory"
	case kindFile:
		return "regular file"
	default:
		return "special file (fifo, socket or device)"
	}
}

// attrs plans the owner and mode a kept node gets; nil keeps what it has.
func (p *planner) attrs(e entry, cur vnode, m *uint32, uid, gid *int) {
	chown := uid != nil && *uid != cur.uid || gid != nil && *gid != cur.gid
	next := cur
	if chown {
		u, g := cur.uid, cur.gid
		if uid != nil {
			u = *uid
		}
		if gid != nil {
			g = *gid
		}
		next.uid, next.gid = u, g
		p.add(fmt.Sprintf("chown %s %d:%d (was %d:%d)", e.shown(), u, g, cur.uid, cur.gid), "", func() error {
			return p.r.at(e.rel, func(dirfd int, name string) error { return setAttrs(dirfd, name, e.rel, cur.kind, nil, &u, &g) })
		})
	}
	want := cur.mode
	if m != nil {
		want = *m
	}
	// chown(2) clears setuid/setgid: put them back even when the mode itself is unchanged.
	if cur.kind != kindLink && (want != cur.mode || chown && want&0o6000 != 0) {
		next.mode = want
		p.add(fmt.Sprintf("chmod %s %04o (was %04o)", e.shown(), want, cur.mode), "", func() error {
			return p.r.at(e.rel, func(dirfd int, name string) error { return setAttrs(dirfd, name, e.rel, cur.kind, &want, nil, nil) })
		})
	}
	p.v.over[e.rel] = next
}

// or returns the declared value, else def.
func or[T any](declared *T, def T) *T {
	if declared != nil {
		return declared
	}
	return &def
}

func (p *planner) dir(e entry) error {
	cur, err := p.v.get(e.rel)
	if err != nil {
		return err
	}
	parent, err := p.parentOf(e.rel)
	if err != nil {
		return err
	}
	if cur.kind == kindDir && !(e.overwrite && (p.replaceAll || p.replaceDirs[e.rel]) && !cur.planned) {
		if !e.overwrite || e.rel == "/" {
			p.attrs(e, cur, e.mode, e.uid, e.gid)
			return nil
		}
		// Kept although declared with overwrite: it already is what Ignition would leave.
		f := fresh(parent, kindDir, 0o755)
		p.attrs(e, cur, or(e.mode, f.mode), or(e.uid, f.uid), or(e.gid, f.gid))
		return nil
	}
	if cur.kind != kindAbsent && !e.overwrite {
		return p.refuse(e, "a %s is there, not a directory, and the config does not say overwrite: true", describe(cur))
	}
	if cur.kind == kindDir && p.replaceAll {
		p.overwriteDirs = append(p.overwriteDirs, e.rel)
	}
	mkParents, note := func() error { return nil }, ""
	if cur.kind == kindAbsent {
		if parent, mkParents, note, err = p.parents(e); err != nil {
			return err
		}
	}
	n := fresh(parent, kindDir, 0o755)
	if e.mode != nil {
		n.mode = *e.mode
	}
	if e.uid != nil {
		n.uid = *e.uid
	}
	if e.gid != nil {
		n.gid = *e.gid
	}
	p.v.over[e.rel] = n
	m := n.mode
	if cur.kind == kindAbsent {
		p.add(fmt.Sprintf("create directory %s (mode %04o%s%s)", e.shown(), m, ownerNote(e), note), "", func() error {
			if err := mkParents(); err != nil {
				return err
			}
			return p.r.mkdir(e.rel, m, e.uid, e.gid)
		})
		return nil
	}
	why := "it holds what the config does not declare there, and the config says overwrite: true"
	if cur.kind != kindDir {
		why = "a " + describe(cur) + " is there and the config says overwrite: true"
	}
	p.add(fmt.Sprintf("move %s aside to %s and create the directory anew (mode %04o%s): %s", e.shown(), path.Base(e.rel)+p.backup, m, ownerNote(e), why), "", func() error {
		if err := p.r.moveAside(e.rel, p.backup); err != nil {
			return err
		}
		return p.r.mkdir(e.rel, m, e.uid, e.gid)
	})
	return nil
}

func ownerNote(e entry) string {
	var s []string
	if e.uid != nil {
		s = append(s, fmt.Sprintf("user %d", *e.uid))
	}
	if e.gid != nil {
		s = append(s, fmt.Sprintf("group %d", *e.gid))
	}
	if len(s) == 0 {
		return ""
	}
	return ", " + strings.Join(s, ", ")
}

func (p *planner) file(e entry) error {
	cur, err := p.v.get(e.rel)
	if err != nil {
		return err
	}
	parent, err := p.parentOf(e.rel)
	if err != nil {
		return err
	}
	var old []byte
	mkParents, note := func() error { return nil }, ""
	switch cur.kind {
	case kindAbsent:
		if parent, mkParents, note, err = p.parents(e); err != nil {
			return err
		}
	case kindFile:
		if e.data == nil {
			// No contents declared: the file keeps its own, and its mode and owner unless set.
			p.attrs(e, cur, e.mode, e.uid, e.gid)
			return nil
		}
		if old, err = p.v.fileData(e.rel, cur); err != nil {
			return err
		}
		if bytes.Equal(old, e.data) {
			f := fresh(parent, kindFile, 0o644)
			p.attrs(e, cur, or(e.mode, f.mode), or(e.uid, f.uid), or(e.gid, f.gid))
			return nil
		}
		if !e.overwrite {
			return p.refuse(e, "exists with other contents and the config does not say overwrite: true")
		}
	default:
		if !e.overwrite {
			return p.refuse(e, "a %s is there, not a regular file, and the config does not say overwrite: true", describe(cur))
		}
	}
	n := fresh(parent, kindFile, 0o644)
	if e.mode != nil {
		n.mode = *e.mode
	}
	if e.uid != nil {
		n.uid = *e.uid
	}
	if e.gid != nil {
		n.gid = *e.gid
	}
	n.data = e.data
	if n.data == nil {
		n.data = []byte{}
	}
	p.v.over[e.rel] = n
	p.unitFiles = p.unitFiles || e.unit
	m, data, replace := n.mode, n.data, cur.kind != kindAbsent
	summary := fmt.Sprintf("write %s (mode %04o%s, new file%s)", e.shown(), m, ownerNote(e), note)
	if replace {
		summary = fmt.Sprintf("write %s (mode %04o%s; the %s there is kept as %s)", e.shown(), m, ownerNote(e), describe(cur), path.Base(e.rel)+p.backup)
	}
	diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: lines(old), B: lines(data), FromFile: e.decl + " (node)", ToFile: e.decl + " (config)", Context: 2,
	})
	p.add(summary, diff, func() error {
		if err := mkParents(); err != nil {
			return err
		}
		return p.r.put(e.rel, replace, p.backup, writeFile(data, m, e.uid, e.gid))
	})
	return nil
}

// lines splits contents for a diff: none for an empty file, and a last line without a newline
// gets one (difflib.SplitLines would add an empty line to every file that ends in one).
func lines(b []byte) []string {
	var out []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if l == "" {
			continue
		}
		if !strings.HasSuffix(l, "\n") {
			l += "\n"
		}
		out = append(out, l)
	}
	return out
}

func (p *planner) symlink(e entry) error {
	cur, err := p.v.get(e.rel)
	if err != nil {
		return err
	}
	mkParents, note := func() error { return nil }, ""
	switch {
	case cur.kind == kindLink && filepath.Clean(cur.target) == filepath.Clean(e.target):
		// "If overwrite is false and a matching link exists at the path, Ignition will only set
		// the owner and group."
		p.attrs(e, cur, nil, e.uid, e.gid)
		return nil
	case cur.kind == kindAbsent:
		if _, mkParents, note, err = p.parents(e); err != nil {
			return err
		}
	case !e.overwrite:
		return p.refuse(e, "a %s is there, not a symlink to %s, and the config does not say overwrite: true", describe(cur), e.target)
	}
	parent, err := p.parentOf(e.rel)
	if err != nil {
		return err
	}
	n := fresh(parent, kindLink, 0)
	n.target = e.target
	if e.uid != nil {
		n.uid = *e.uid
	}
	if e.gid != nil {
		n.gid = *e.gid
	}
	p.v.over[e.rel] = n
	replace := cur.kind != kindAbsent
	summary := fmt.Sprintf("link %s -> %s (symlink%s%s)", e.shown(), e.target, ownerNote(e), note)
	if replace {
		summary = fmt.Sprintf("link %s -> %s (symlink%s; the %s there is kept as %s)", e.shown(), e.target, ownerNote(e), describe(cur), path.Base(e.rel)+p.backup)
	}
	p.add(summary, "", func() error {
		if err := mkParents(); err != nil {
			return err
		}
		return p.r.put(e.rel, replace, p.backup, makeSymlink(e.target, e.uid, e.gid))
	})
	return nil
}

func (p *planner) hardlink(e entry) error {
	t, err := p.v.get(e.target)
	if err != nil {
		return err
	}
	switch t.kind {
	case kindAbsent:
		return p.refuse(e, "its target %s does not exist", e.target)
	case kindDir:
		return p.refuse(e, "its target %s is a directory, which cannot be hard-linked", e.target)
	}
	cur, err := p.v.get(e.rel)
	if err != nil {
		return err
	}
	if cur.kind != kindAbsent && !cur.planned && !t.planned && cur.dev == t.dev && cur.ino == t.ino {
		return nil // already the same inode
	}
	mkParents, note := func() error { return nil }, ""
	switch {
	case cur.kind == kindAbsent:
		if _, mkParents, note, err = p.parents(e); err != nil {
			return err
		}
	case !e.overwrite:
		return p.refuse(e, "a %s is there, not a hard link to %s, and the config does not say overwrite: true", describe(cur), e.target)
	}
	n := t
	n.planned, n.hardTo = true, e.target
	p.v.over[e.rel] = n
	replace := cur.kind != kindAbsent
	summary := fmt.Sprintf("link %s to %s (hard link%s)", e.shown(), e.target, note)
	if replace {
		summary = fmt.Sprintf("link %s to %s (hard link; the %s there is kept as %s)", e.shown(), e.target, describe(cur), path.Base(e.rel)+p.backup)
	}
	p.add(summary, "", func() error {
		if err := mkParents(); err != nil {
			return err
		}
		return p.r.put(e.rel, replace, p.backup, p.r.makeHardlink(e.target))
	})
	return nil
}

// matches says whether the directory d on disk is already what the plan, replacing it, would
// leave: the same nodes beneath it, each with the same kind, mode, owner, contents or target (and
// hard links to the same inode).
func (p *planner) matches(d string) (bool, error) {
	want := map[string]vnode{}
	for rel, n := range p.v.over {
		if rel == d || strings.HasPrefix(rel, d+"/") {
			want[rel] = n
		}
	}
	same := true
	err := filepath.WalkDir(p.r.host(d), func(full string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(p.r.dir, full)
		if err != nil {
			return err
		}
		rel = path.Clean("/" + filepath.ToSlash(rel))
		w, ok := want[rel]
		delete(want, rel)
		if !ok {
			same = false
			return filepath.SkipAll
		}
		got, err := p.v.disk(rel)
		if err != nil {
			return err
		}
		if ok, err := p.sameNode(rel, got, w); err != nil || !ok {
			same = false
			return err
		}
		return nil
	})
	if err != nil && !errors.Is(err, filepath.SkipAll) {
		return false, err
	}
	return same && len(want) == 0, nil
}

func (p *planner) sameNode(rel string, got, want vnode) (bool, error) {
	if want.hardTo != "" {
		t, err := p.v.disk(want.hardTo)
		return err == nil && t.kind != kindAbsent && t.dev == got.dev && t.ino == got.ino, err
	}
	if got.kind != want.kind || got.uid != want.uid || got.gid != want.gid {
		return false, nil
	}
	switch got.kind {
	case kindDir:
		return got.mode == want.mode, nil
	case kindLink:
		return filepath.Clean(got.target) == filepath.Clean(want.target), nil
	case kindFile:
		if got.mode != want.mode {
			return false, nil
		}
		data, err := p.v.fileData(rel, got)
		return err == nil && bytes.Equal(data, want.data), err
	}
	return false, nil
}
