package nodeconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The storage cases below are written from Ignition's own definition of files, directories and
// links (docs/configuration-v3_*.md, "overwrite", "mode", "user"/"group", "hard"; docs/operator-notes.md,
// "Path Traversal and Following Symlinks") and the behaviour its blackbox tests pin down
// (tests/positive/files, tests/negative/files: directories.ordering, links.sym.writeover(.broken),
// links.hard.create.tosym, files.create.overwrite.false, ...). Each case states the tree before, the
// config, and the whole tree after — or that the config is refused and the tree is untouched. Every
// applied case is then computed again and must find nothing to do.
//
// Setuid, setgid and sticky bits are honoured from spec 3.6.0 on; older specs ignore them
// (Ignition's migrating-configs.md: its translation to 3.6 drops them, with a warning), so a 3.4.0
// config asking for them gets the file without them, as Ignition would make it, and the warning.
//
// Modes in the JSON are decimal, as Ignition's are: 420 = 0644, 384 = 0600, 416 = 0640, 448 = 0700,
// 488 = 0750, 493 = 0755, 1023 = 01777, 1533 = 02775, 2541 = 04755.

const bk = ".slipway-backup-20261121T163000Z" // the backup suffix for `now`

type fsCase struct {
	name    string
	version string // the config's spec; "" is 3.4.0 (Butane's flatcar 1.1.0)
	warn    string // part of a warning Ignition's parser must give
	before  tree   // @BASE@ in paths and targets is the directory the root lives in (outside it)
	storage string // the config's "storage" object (spec 3.4.0)
	after   tree   // the whole tree afterwards (parents not listed are 0755 root directories)
	refused string // when set: part of the error, and the tree must be as before
	// notOnHost are absolute host paths the apply must not create (escapes through symlinks).
	notOnHost []string
}

func TestStorageFiles(t *testing.T) {
	runFS(t, []fsCase{
		{
			name:    "created with the default mode 0644, missing parents 0755",
			storage: `{"files":[{"path":"/etc/app/a.conf","contents":{"source":"data:,x"}}]}`,
			after:   tree{"/etc/app/a.conf": file(0o644, "x")},
		},
		{
			name:    "parents are 0755, not the file's mode",
			storage: `{"files":[{"path":"/a/b/secret","mode":384,"contents":{"source":"data:,s"}}]}`,
			after:   tree{"/a": dir(0o755), "/a/b": dir(0o755), "/a/b/secret": file(0o600, "s")},
		},
		{
			name:    "setuid is part of the mode (spec 3.6.0)",
			version: "3.6.0",
			storage: `{"files":[{"path":"/opt/bin/tool","mode":2541,"contents":{"source":"data:,%23!/bin/sh"}}]}`,
			after:   tree{"/opt/bin/tool": file(0o4755, "#!/bin/sh")},
		},
		{
			name:    "setuid in spec 3.4.0: ignored, as Ignition ignores it, with Ignition's warning",
			storage: `{"files":[{"path":"/opt/bin/tool","mode":2541,"contents":{"source":"data:,%23!/bin/sh"}}]}`,
			after:   tree{"/opt/bin/tool": file(0o755, "#!/bin/sh")},
			warn:    "setuid/setgid/sticky bits are not supported or functional in spec versions older than 3.6.0",
		},
		{
			name:    "no contents: an empty file",
			storage: `{"files":[{"path":"/etc/empty"}]}`,
			after:   tree{"/etc/empty": file(0o644, "")},
		},
		{
			name:    "no contents, file exists: contents, mode and owner kept",
			before:  tree{"/etc/e": file(0o600, "keep").by(1000, 1000)},
			storage: `{"files":[{"path":"/etc/e"}]}`,
			after:   tree{"/etc/e": file(0o600, "keep").by(1000, 1000)},
		},
		{
			name:    "no contents, file exists, mode given: only the mode changes",
			before:  tree{"/etc/e": file(0o600, "keep")},
			storage: `{"files":[{"path":"/etc/e","mode":416}]}`,
			after:   tree{"/etc/e": file(0o640, "keep")},
		},
		{
			name:    "same contents: in line, mode and owner as Ignition writes it",
			before:  tree{"/etc/e": file(0o600, "x").by(1000, 1000)},
			storage: `{"files":[{"path":"/etc/e","contents":{"source":"data:,x"}}]}`,
			after:   tree{"/etc/e": file(0o644, "x")},
		},
		{
			name:    "other contents without overwrite: refused",
			before:  tree{"/etc/e": file(0o644, "mine")},
			storage: `{"directories":[{"path":"/new"}],"files":[{"path":"/etc/e","contents":{"source":"data:,theirs"}}]}`,
			refused: "overwrite",
		},
		{
			name:    "other contents with overwrite: replaced, the old one kept beside it",
			before:  tree{"/etc/e": file(0o600, "old").by(1000, 1000)},
			storage: `{"files":[{"path":"/etc/e","overwrite":true,"contents":{"source":"data:,new"}}]}`,
			after:   tree{"/etc/e": file(0o644, "new"), "/etc/e" + bk: file(0o600, "old").by(1000, 1000)},
		},
		{
			name:    "a directory in the way, no overwrite: refused",
			before:  tree{"/etc/e/x": file(0o644, "x")},
			storage: `{"files":[{"path":"/etc/e","contents":{"source":"data:,f"}}]}`,
			refused: "/etc/e",
		},
		{
			name:    "a directory in the way, overwrite: moved aside whole",
			before:  tree{"/etc/e": dir(0o700), "/etc/e/x": file(0o644, "x")},
			storage: `{"files":[{"path":"/etc/e","overwrite":true,"contents":{"source":"data:,f"}}]}`,
			after:   tree{"/etc/e": file(0o644, "f"), "/etc/e" + bk: dir(0o700), "/etc/e" + bk + "/x": file(0o644, "x")},
		},
		{
			name:    "a symlink in the way, no overwrite: refused even when it leads to the same contents",
			before:  tree{"/etc/file": link("/usr/rofile"), "/usr/rofile": file(0o644, "x")},
			storage: `{"files":[{"path":"/etc/file","contents":{"source":"data:,x"}}]}`,
			refused: "/etc/file",
		},
		{
			name:    "a symlink in the way, overwrite: the link is replaced, what it pointed at is untouched",
			before:  tree{"/etc/file": link("/usr/rofile"), "/usr/rofile": file(0o644, "ro")},
			storage: `{"files":[{"path":"/etc/file","mode":420,"overwrite":true,"contents":{"source":""}}]}`,
			after:   tree{"/etc/file": file(0o644, ""), "/etc/file" + bk: link("/usr/rofile"), "/usr/rofile": file(0o644, "ro")},
		},
		{
			name:    "a dangling symlink in the way, no overwrite: refused",
			before:  tree{"/etc/file": link("/usr/missing")},
			storage: `{"files":[{"path":"/etc/file","contents":{"source":"data:,x"}}]}`,
			refused: "/etc/file",
		},
		{
			name:    "a dangling symlink in the way, overwrite: replaced, nothing created where it pointed",
			before:  tree{"/etc/file": link("/usr/missing")},
			storage: `{"files":[{"path":"/etc/file","overwrite":true,"contents":{"source":"data:,x"}}]}`,
			after:   tree{"/etc/file": file(0o644, "x"), "/etc/file" + bk: link("/usr/missing")},
		},
		{
			name:    "a fifo in the way, no overwrite: refused",
			before:  tree{"/run/p": {kind: "other", mode: 0o600}},
			storage: `{"files":[{"path":"/run/p","contents":{"source":"data:,x"}}]}`,
			refused: "/run/p",
		},
		{
			name:    "gzip contents with a verification hash",
			storage: `{"files":[{"path":"/etc/z","contents":{"compression":"gzip","source":"data:;base64,H4sIAAAAAAAA/8pIzcnJBwQAAP//hqYQNgUAAAA=","verification":{"hash":"sha256-2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}}}]}`,
			after:   tree{"/etc/z": file(0o644, "hello")},
		},
	})
}

func TestStorageDirectories(t *testing.T) {
	runFS(t, []fsCase{
		{
			name:    "created 0755 by default",
			storage: `{"directories":[{"path":"/var/lib/app"}]}`,
			after:   tree{"/var/lib/app": dir(0o755)},
		},
		{
			name:    "missing parents 0755, not the leaf's mode",
			storage: `{"directories":[{"path":"/a/b/private","mode":448}]}`,
			after:   tree{"/a": dir(0o755), "/a/b": dir(0o755), "/a/b/private": dir(0o700)},
		},
		{
			name:    "sticky bit kept (01777, spec 3.6.0)",
			version: "3.6.0",
			storage: `{"directories":[{"path":"/var/tmp/shared","mode":1023}]}`,
			after:   tree{"/var/tmp/shared": dir(0o1777)},
		},
		{
			name:    "setgid kept (02775, spec 3.6.0)",
			version: "3.6.0",
			storage: `{"directories":[{"path":"/srv/team","mode":1533}]}`,
			after:   tree{"/srv/team": dir(0o2775)},
		},
		{
			name:    "sticky bit in spec 3.3.0: ignored, with Ignition's warning",
			version: "3.3.0",
			storage: `{"directories":[{"path":"/var/tmp/shared","mode":1023}]}`,
			after:   tree{"/var/tmp/shared": dir(0o777)},
			warn:    "older than 3.6.0",
		},
		{
			name:    "a subdirectory of a setgid directory inherits its group and setgid, as mkdir(2) gives them",
			version: "3.6.0",
			before:  tree{"/srv/team": dir(0o2775).by(0, 4343)},
			storage: `{"directories":[{"path":"/srv/team/a/b"}],"files":[{"path":"/srv/team/f","contents":{"source":"data:,f"}}]}`,
			after: tree{"/srv/team": dir(0o2775).by(0, 4343), "/srv/team/a": dir(0o2755).by(0, 4343), "/srv/team/a/b": dir(0o2755).by(0, 4343),
				"/srv/team/f": file(0o644, "f").by(0, 4343)},
		},
		{
			name:    "exists, no mode declared: its mode and owner are kept",
			before:  tree{"/var/lib/app": dir(0o700).by(1000, 1000), "/var/lib/app/data": file(0o600, "d")},
			storage: `{"directories":[{"path":"/var/lib/app"}]}`,
			after:   tree{"/var/lib/app": dir(0o700).by(1000, 1000), "/var/lib/app/data": file(0o600, "d")},
		},
		{
			name:    "exists, mode declared: only the mode changes, contents kept",
			before:  tree{"/var/lib/app": dir(0o700), "/var/lib/app/data": file(0o600, "d")},
			storage: `{"directories":[{"path":"/var/lib/app","mode":488}]}`,
			after:   tree{"/var/lib/app": dir(0o750), "/var/lib/app/data": file(0o600, "d")},
		},
		{
			name:    "a file in the way, no overwrite: refused",
			before:  tree{"/foo/bar": file(0o644, "hello, world")},
			storage: `{"directories":[{"path":"/foo/bar"}]}`,
			refused: "/foo/bar",
		},
		{
			name:    "a file in the way, overwrite: moved aside",
			before:  tree{"/foo/bar": file(0o644, "hello, world")},
			storage: `{"directories":[{"path":"/foo/bar","overwrite":true}]}`,
			after:   tree{"/foo/bar": dir(0o755), "/foo/bar" + bk: file(0o644, "hello, world")},
		},
		{
			name:    "a symlink to a directory in the way, no overwrite: refused (the last component is not followed)",
			before:  tree{"/foo/bar": link("/srv"), "/srv": dir(0o755)},
			storage: `{"directories":[{"path":"/foo/bar"}]}`,
			refused: "/foo/bar",
		},
		{
			name:    "a symlink in the way, overwrite: replaced by a directory",
			before:  tree{"/foo/bar": link("/srv"), "/srv": dir(0o755)},
			storage: `{"directories":[{"path":"/foo/bar","overwrite":true}]}`,
			after:   tree{"/foo/bar": dir(0o755), "/foo/bar" + bk: link("/srv"), "/srv": dir(0o755)},
		},
		{
			name:    "exists with overwrite, holding what the config does not declare: emptied (old one kept aside)",
			before:  tree{"/foo/bar": dir(0o700), "/foo/bar/baz": file(0o644, "hello, world")},
			storage: `{"directories":[{"path":"/foo/bar","overwrite":true}]}`,
			after:   tree{"/foo/bar": dir(0o755), "/foo/bar" + bk: dir(0o700), "/foo/bar" + bk + "/baz": file(0o644, "hello, world")},
		},
		{
			name:    "exists with overwrite, holding only what the config declares: in line",
			before:  tree{"/foo/bar": dir(0o755), "/foo/bar/sub": dir(0o755), "/foo/bar/sub/f": file(0o644, "y")},
			storage: `{"directories":[{"path":"/foo/bar","overwrite":true}],"files":[{"path":"/foo/bar/sub/f","contents":{"source":"data:,y"}}]}`,
			after:   tree{"/foo/bar": dir(0o755), "/foo/bar/sub": dir(0o755), "/foo/bar/sub/f": file(0o644, "y")},
		},
		{
			name:    "exists with overwrite, a declared child differs: emptied, the child written fresh",
			before:  tree{"/foo/bar": dir(0o755), "/foo/bar/f": file(0o644, "old")},
			storage: `{"directories":[{"path":"/foo/bar","overwrite":true}],"files":[{"path":"/foo/bar/f","contents":{"source":"data:,new"}}]}`,
			after:   tree{"/foo/bar": dir(0o755), "/foo/bar/f": file(0o644, "new"), "/foo/bar" + bk: dir(0o755), "/foo/bar" + bk + "/f": file(0o644, "old")},
		},
		{
			name:    "/ itself: in line",
			storage: `{"directories":[{"path":"/"}]}`,
			after:   tree{},
		},
	})
}

func TestStorageLinks(t *testing.T) {
	runFS(t, []fsCase{
		{
			name:    "symlink created, parents 0755, a dangling target is fine",
			storage: `{"links":[{"path":"/etc/alt/l","target":"/opt/missing"}]}`,
			after:   tree{"/etc/alt/l": link("/opt/missing")},
		},
		{
			name:    "symlink to a declared file",
			storage: `{"files":[{"path":"/foo/target","contents":{"source":"data:,t"}}],"links":[{"path":"/foo/bar","target":"/foo/target"}]}`,
			after:   tree{"/foo/target": file(0o644, "t"), "/foo/bar": link("/foo/target")},
		},
		{
			name:    "symlink exists with the same target: in line",
			before:  tree{"/foo/bar": link("/foo/target")},
			storage: `{"links":[{"path":"/foo/bar","target":"/foo/target"}]}`,
			after:   tree{"/foo/bar": link("/foo/target")},
		},
		{
			name:    "symlink with another target, no overwrite: refused",
			before:  tree{"/foo/bar": link("/elsewhere")},
			storage: `{"links":[{"path":"/foo/bar","target":"/foo/target"}]}`,
			refused: "/foo/bar",
		},
		{
			name:    "symlink with another target, overwrite: replaced, the old link kept",
			before:  tree{"/foo/bar": link("/elsewhere")},
			storage: `{"links":[{"path":"/foo/bar","target":"/foo/target","overwrite":true}]}`,
			after:   tree{"/foo/bar": link("/foo/target"), "/foo/bar" + bk: link("/elsewhere")},
		},
		{
			name:    "a file in the way, no overwrite: refused",
			before:  tree{"/foo/bar": file(0o644, "asdf\nfdsa")},
			storage: `{"links":[{"path":"/foo/bar","target":"/foo/target"}]}`,
			refused: "/foo/bar",
		},
		{
			name:    "a file in the way, overwrite: replaced",
			before:  tree{"/foo/bar": file(0o644, "asdf")},
			storage: `{"links":[{"path":"/foo/bar","target":"/foo/target","overwrite":true}]}`,
			after:   tree{"/foo/bar": link("/foo/target"), "/foo/bar" + bk: file(0o644, "asdf")},
		},
		{
			name:    "a non-empty directory in the way, no overwrite: refused",
			before:  tree{"/foo/bar/baz": file(0o644, "asdf")},
			storage: `{"links":[{"path":"/foo/bar","target":"/foo/target"}]}`,
			refused: "/foo/bar",
		},
		{
			name:    "a non-empty directory in the way, overwrite: moved aside",
			before:  tree{"/foo/bar/baz": file(0o644, "asdf")},
			storage: `{"links":[{"path":"/foo/bar","target":"/foo/target","overwrite":true}]}`,
			after:   tree{"/foo/bar": link("/foo/target"), "/foo/bar" + bk: dir(0o755), "/foo/bar" + bk + "/baz": file(0o644, "asdf")},
		},
		{
			name:    "hard link to a declared file, made after it",
			storage: `{"files":[{"path":"/foo/deep/target","contents":{"source":"data:,t"}}],"links":[{"path":"/foo/h","target":"/foo/deep/target","hard":true}]}`,
			after:   tree{"/foo/deep/target": file(0o644, "t"), "/foo/h": file(0o644, "t")},
		},
		{
			name:    "hard link already to the same inode: in line",
			before:  tree{"/foo/target": file(0o644, "t")},
			storage: `{"links":[{"path":"/foo/h","target":"/foo/target","hard":true}]}`,
			after:   tree{"/foo/target": file(0o644, "t"), "/foo/h": file(0o644, "t")},
		},
		{
			name:    "hard link where another file is, no overwrite: refused",
			before:  tree{"/foo/target": file(0o644, "t"), "/foo/h": file(0o644, "t")},
			storage: `{"links":[{"path":"/foo/h","target":"/foo/target","hard":true}]}`,
			refused: "/foo/h",
		},
		{
			name:    "hard link where another file is, overwrite: replaced",
			before:  tree{"/foo/target": file(0o644, "t"), "/foo/h": file(0o600, "other")},
			storage: `{"links":[{"path":"/foo/h","target":"/foo/target","hard":true,"overwrite":true}]}`,
			after:   tree{"/foo/target": file(0o644, "t"), "/foo/h": file(0o644, "t"), "/foo/h" + bk: file(0o600, "other")},
		},
		{
			name:    "hard link to nothing: refused",
			storage: `{"links":[{"path":"/foo/h","target":"/foo/missing","hard":true}]}`,
			refused: "/foo/missing",
		},
		{
			name:    "hard link to a symlink links the symlink itself",
			before:  tree{"/bar": link("nonexistent")},
			storage: `{"links":[{"path":"/foo","target":"/bar","hard":true}]}`,
			after:   tree{"/bar": link("nonexistent"), "/foo": link("nonexistent")},
		},
		{
			name:    "hard link to a directory: refused",
			before:  tree{"/d": dir(0o755)},
			storage: `{"links":[{"path":"/h","target":"/d","hard":true}]}`,
			refused: "/d",
		},
	})
}

// Owners by id, and by name looked up in the root's /etc/passwd and /etc/group (names this
// machine does not have), set before the mode so setuid survives the chown.
func TestStorageOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	accounts := tree{
		"/etc/passwd": file(0o644, "root:x:0:0:root:/root:/bin/sh\nslipway-svc:x:4242:4343::/var/lib/svc:/sbin/nologin\n"),
		"/etc/group":  file(0o644, "root:x:0:\nslipway-grp:x:4343:\nslipway-ops:x:5151:slipway-svc\n"),
	}
	with := func(extra tree) tree {
		out := tree{}
		for p, n := range accounts {
			out[p] = n
		}
		for p, n := range extra {
			out[p] = n
		}
		return out
	}
	runFS(t, []fsCase{
		{
			name:    "file by id, setuid kept after the chown",
			version: "3.6.0",
			storage: `{"files":[{"path":"/opt/bin/t","mode":2541,"user":{"id":1234},"group":{"id":5678},"contents":{"source":"data:,x"}}]}`,
			after:   tree{"/opt/bin/t": file(0o4755, "x").by(1234, 5678)},
		},
		{
			name:    "directory by name from the root's passwd and group",
			before:  accounts,
			storage: `{"directories":[{"path":"/var/lib/svc","mode":488,"user":{"name":"slipway-svc"},"group":{"name":"slipway-ops"}}]}`,
			after:   with(tree{"/var/lib/svc": dir(0o750).by(4242, 5151)}),
		},
		{
			name:    "existing file by name: chown only",
			before:  with(tree{"/etc/svc.conf": file(0o640, "c")}),
			storage: `{"files":[{"path":"/etc/svc.conf","user":{"name":"slipway-svc"},"group":{"name":"slipway-grp"}}]}`,
			after:   with(tree{"/etc/svc.conf": file(0o640, "c").by(4242, 4343)}),
		},
		{
			name:    "symlink owned by id (lchown, the target is untouched)",
			before:  tree{"/srv/t": file(0o644, "t")},
			storage: `{"links":[{"path":"/srv/l","target":"/srv/t","user":{"id":77},"group":{"id":88}}]}`,
			after:   tree{"/srv/t": file(0o644, "t"), "/srv/l": link("/srv/t").by(77, 88)},
		},
		{
			name:    "existing matching symlink, owner declared: only the owner changes",
			before:  tree{"/srv/l": link("/srv/t")},
			storage: `{"links":[{"path":"/srv/l","target":"/srv/t","user":{"id":77}}]}`,
			after:   tree{"/srv/l": link("/srv/t").by(77, 0)},
		},
		{
			name:    "a user the root does not know: refused",
			before:  accounts,
			storage: `{"directories":[{"path":"/new"}],"files":[{"path":"/etc/x","user":{"name":"nobody-here"}}]}`,
			refused: "nobody-here",
		},
		{
			name:    "a group the root does not know: refused",
			before:  accounts,
			storage: `{"files":[{"path":"/etc/x","group":{"name":"root-of-host-only"}}]}`,
			refused: "root-of-host-only",
		},
	})
}

// Everything is resolved inside the root, symlinks included, as Ignition does on the root
// filesystem: "a symlink to /etc is followed to /etc on the root filesystem".
func TestStorageStaysInsideTheRoot(t *testing.T) {
	runFS(t, []fsCase{
		{
			name:      "a symlink to / inside the root: the directory lands at <root>/baz (directories.ordering)",
			before:    tree{"/foo/bar": link("/")},
			storage:   `{"directories":[{"path":"/foo/bar/slipway-test-escaped","mode":511}]}`,
			after:     tree{"/foo/bar": link("/"), "/slipway-test-escaped": dir(0o777)},
			notOnHost: []string{"/slipway-test-escaped"},
		},
		{
			name:    "an absolute symlink naming a host directory outside the root is followed inside it",
			before:  tree{"/foo/bar": link("@BASE@/out")},
			storage: `{"directories":[{"path":"/foo/bar/baz"}],"files":[{"path":"/foo/bar/f","contents":{"source":"data:,x"}}]}`,
			after:   tree{"/foo/bar": link("@BASE@/out"), "@BASE@/out/baz": dir(0o755), "@BASE@/out/f": file(0o644, "x")},
		},
		{
			name:    "a relative symlink climbing out with .. stops at the root",
			before:  tree{"/foo/bar": link("../../..")},
			storage: `{"directories":[{"path":"/foo/bar/baz"}],"links":[{"path":"/foo/bar/l","target":"/x"}]}`,
			after:   tree{"/foo/bar": link("../../.."), "/baz": dir(0o755), "/l": link("/x")},
		},
		{
			name:    "a hard link's target through a symlink leading out is looked up inside",
			before:  tree{"/up": link("../.."), "/etc/shadow": file(0o600, "in-root")},
			storage: `{"links":[{"path":"/h","target":"/up/etc/shadow","hard":true}]}`,
			after:   tree{"/up": link("../.."), "/etc/shadow": file(0o600, "in-root"), "/h": file(0o600, "in-root")},
		},
		{
			name:    "two entries that resolve to one path: refused",
			before:  tree{"/a": link("/b")},
			storage: `{"files":[{"path":"/a/x","contents":{"source":"data:,1"}},{"path":"/b/x","contents":{"source":"data:,2"}}]}`,
			refused: "/b/x",
		},
	})
}

func runFS(t *testing.T, cases []fsCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			// The root is two levels below a directory of its own, so that anything written
			// outside it — the way an escape would — shows up in base.
			base := t.TempDir()
			root := filepath.Join(base, "a", "b", "root")
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			sub := func(tr tree) tree {
				out := tree{}
				for p, n := range tr {
					n.target = strings.ReplaceAll(n.target, "@BASE@", base)
					out[strings.ReplaceAll(p, "@BASE@", base)] = n
				}
				return out
			}
			mkTree(t, root, sub(c.before))
			before := readTree(t, root)
			for _, h := range c.notOnHost {
				if _, err := os.Lstat(h); err == nil {
					t.Fatalf("%s exists on this machine before the test", h)
				}
			}
			t.Cleanup(func() {
				for _, h := range c.notOnHost {
					if _, err := os.Lstat(h); err == nil {
						_ = os.RemoveAll(h)
						t.Errorf("%s was created on the machine, outside the root", h)
					}
				}
				if got := readTree(t, base); len(got) != len(readTree(t, root))+3 {
					t.Errorf("something was written outside the root:\n%s", diffTrees(got, tree{}))
				}
			})

			v := c.version
			if v == "" {
				v = "3.4.0"
			}
			cfg, warnings, err := Parse([]byte(`{"ignition":{"version":"` + v + `"},"storage":` + c.storage + `}`))
			if c.warn != "" && !strings.Contains(strings.Join(warnings, "\n"), c.warn) {
				t.Errorf("warnings %q lack %q", warnings, c.warn)
			}
			var plan *Plan
			if err == nil {
				plan, err = Compute(ctx, cfg, root, newFake(), now)
			}
			if c.refused != "" {
				if err == nil {
					err = plan.Apply(ctx)
					t.Fatalf("not refused; applied (%v):\n%s", err, diffTrees(readTree(t, root), before))
				}
				if !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("error %q does not mention %q", err, c.refused)
				}
				if d := diffTrees(readTree(t, root), before); d != "" {
					t.Fatalf("a refused config changed the node:\n%s", d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := plan.Apply(ctx); err != nil {
				t.Fatalf("%v\nplan:\n%s", err, plan)
			}
			if d := diffTrees(readTree(t, root), withParents(sub(c.after))); d != "" {
				t.Fatalf("tree after apply:\n%s\nplan:\n%s", d, plan)
			}
			again, err := Compute(ctx, cfg, root, newFake(), now.Add(time.Hour))
			if err != nil || len(again.Steps) != 0 {
				t.Fatalf("not idempotent: %v\n%s", err, again)
			}
		})
	}
}

// hard links share the inode: the tree above cannot say so, this can.
func TestHardLinkSharesTheInode(t *testing.T) {
	root := t.TempDir()
	cfg, _, err := Parse([]byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/t","contents":{"source":"data:,t"}}],"links":[{"path":"/h","target":"/t","hard":true}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Compute(context.Background(), cfg, root, newFake(), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	var a, b syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(root, "t"), &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Lstat(filepath.Join(root, "h"), &b); err != nil {
		t.Fatal(err)
	}
	if a.Ino != b.Ino || a.Nlink != 2 {
		t.Fatalf("inodes %d and %d, links %d", a.Ino, b.Ino, a.Nlink)
	}
}

// A mode or owner for "/" is set on the root directory itself — never on this machine's /.
func TestTheRootDirectoryItself(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	var host syscall.Stat_t
	if err := syscall.Stat("/", &host); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Parse([]byte(`{"ignition":{"version":"3.4.0"},"storage":{"directories":[{"path":"/","mode":488,"group":{"id":4343}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := Compute(context.Background(), cfg, root, newFake(), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	var st, after syscall.Stat_t
	if err := syscall.Stat(root, &st); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat("/", &after); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o750 || st.Gid != 4343 || after.Mode != host.Mode || after.Gid != host.Gid {
		t.Fatalf("root %04o gid %d; this machine's / %o -> %o, gid %d -> %d", st.Mode&0o7777, st.Gid, host.Mode, after.Mode, host.Gid, after.Gid)
	}
}
