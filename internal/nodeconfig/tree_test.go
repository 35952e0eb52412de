package nodeconfig

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// node is one entry of a filesystem tree as the tests write and read it: the whole mode (with
// setuid/setgid/sticky, as Ignition's mode field means it) and the numeric owner, never Go's
// FileMode translation of them.
type node struct {
	kind     string // "file", "dir", "link" (a symlink), "other" (fifo, socket, device)
	mode     uint32 // mode & 07777 for files and directories; 0 for links
	data     string // file contents
	target   string // symlink target
	uid, gid int
}

func file(mode uint32, data string) node { return node{kind: "file", mode: mode, data: data} }
func dir(mode uint32) node               { return node{kind: "dir", mode: mode} }
func link(target string) node            { return node{kind: "link", target: target} }

// by sets the owner.
func (n node) by(uid, gid int) node { n.uid, n.gid = uid, gid; return n }

// tree maps paths inside the root ("/etc/x") to nodes. Parents a test does not list are 0755
// directories owned by root, as readTree reports them.
type tree map[string]node

// mkTree writes t under root, parents first; a test process runs as root here, so owners are set.
func mkTree(t *testing.T, root string, tr tree) {
	t.Helper()
	paths := make([]string, 0, len(tr))
	for p := range tr {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool {
		return treeDepth(paths[i]) < treeDepth(paths[j]) || treeDepth(paths[i]) == treeDepth(paths[j]) && paths[i] < paths[j]
	})
	for _, p := range paths {
		n, full := tr[p], filepath.Join(root, p)
		if (n.uid != 0 || n.gid != 0) && os.Geteuid() != 0 {
			t.Skip("owners other than root need root to set")
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch n.kind {
		case "file":
			err = os.WriteFile(full, []byte(n.data), 0o600)
		case "dir":
			err = os.Mkdir(full, 0o700)
		case "link":
			err = os.Symlink(n.target, full)
		case "other":
			err = syscall.Mkfifo(full, 0o600)
		default:
			t.Fatalf("%s: unknown kind %q", p, n.kind)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(full, n.uid, n.gid); err != nil {
			t.Fatal(err)
		}
		if n.kind != "link" {
			// chmod(2) with the raw bits: after the chown, which clears setuid/setgid.
			if err := syscall.Chmod(full, n.mode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func treeDepth(p string) int { return strings.Count(strings.Trim(p, "/"), "/") }

// readTree reads everything under root without following symlinks.
func readTree(t *testing.T, root string) tree {
	t.Helper()
	out := tree{}
	err := filepath.WalkDir(root, func(full string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if full == root {
			return nil
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(full, &st); err != nil {
			return err
		}
		n := node{uid: int(st.Uid), gid: int(st.Gid)}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			b, err := os.ReadFile(full)
			if err != nil {
				return err
			}
			n.kind, n.mode, n.data = "file", st.Mode&0o7777, string(b)
		case syscall.S_IFDIR:
			n.kind, n.mode = "dir", st.Mode&0o7777
		case syscall.S_IFLNK:
			target, err := os.Readlink(full)
			if err != nil {
				return err
			}
			n.kind, n.target = "link", target
		default:
			n.kind, n.mode = "other", st.Mode&0o7777
		}
		out["/"+filepath.ToSlash(strings.TrimPrefix(full, root+"/"))] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// withParents adds the 0755 root-owned parent directories a test did not list.
func withParents(tr tree) tree {
	out := tree{}
	for p, n := range tr {
		out[p] = n
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			if _, ok := tr[d]; !ok {
				out[d] = dir(0o755)
			}
		}
	}
	return out
}

// diffTrees says how got differs from want, one line per path; "" when they are equal.
func diffTrees(got, want tree) string {
	var lines []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			lines = append(lines, "missing "+p+": want "+w.String())
		case g != w:
			lines = append(lines, p+": got "+g.String()+", want "+w.String())
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			lines = append(lines, "unexpected "+p+": "+g.String())
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (n node) String() string {
	own := ""
	if n.uid != 0 || n.gid != 0 {
		own = fmt.Sprintf(" %d:%d", n.uid, n.gid)
	}
	switch n.kind {
	case "file":
		return fmt.Sprintf("file %04o%s %q", n.mode, own, n.data)
	case "link":
		return "link -> " + n.target + own
	default:
		return fmt.Sprintf("%s %04o%s", n.kind, n.mode, own)
	}
}
