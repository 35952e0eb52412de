package nodeconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
)

// rootFS is the node's filesystem seen from --root. Paths in the config are resolved as Ignition
// resolves them on the root filesystem (docs/operator-notes.md, "Path Traversal and Following
// Symlinks"): every component but the last is followed if it is a symlink, as if the root were
// "/" — an absolute symlink starts again at the root, ".." stops there — and the last component is
// the node itself, never followed, so that a symlink there can be replaced rather than written
// through.
//
// Planning reads through the resolved paths; applying never follows a symlink at all: it walks
// the resolved path one component at a time with O_NOFOLLOW and works on the last one with the
// *at system calls relative to its directory. A symlink swapped in between plan and apply makes the
// step fail instead of writing outside the root.
type rootFS struct {
	dir string // absolute, cleaned, symlinks evaluated: securejoin wants a root without them
}

func openRoot(dir string) (*rootFS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("--root %s: %w", dir, err)
	}
	if st, err := os.Stat(real); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("--root %s is not a directory", dir)
	}
	return &rootFS{dir: real}, nil
}

// resolve returns where p (absolute, clean: Ignition's validation guarantees both) is inside the
// root, as a clean absolute path without symlinks in its parent components.
func (r *rootFS) resolve(p string) (string, error) {
	p = path.Clean("/" + p)
	if p == "/" {
		return "/", nil
	}
	parent, err := r.resolveAll(path.Dir(p))
	if err != nil {
		return "", err
	}
	return path.Join(parent, path.Base(p)), nil
}

// resolveAll is resolve following the last component too: for a hard link's target directory
// and the account files.
func (r *rootFS) resolveAll(p string) (string, error) {
	full, err := securejoin.SecureJoin(r.dir, p)
	if err != nil {
		return "", fmt.Errorf("resolving %s inside %s: %w", p, r.dir, err)
	}
	rel, err := filepath.Rel(r.dir, full)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("resolving %s: %s is outside %s", p, full, r.dir)
	}
	return path.Clean("/" + filepath.ToSlash(rel)), nil
}

// host is where a resolved path is on this machine, for reading while planning.
func (r *rootFS) host(rel string) string { return filepath.Join(r.dir, filepath.FromSlash(rel)) }

// openDir opens the directory rel (resolved, so it holds no symlinks) without following any
// symlink, for the *at calls of one step. The caller closes it.
func (r *rootFS) openDir(rel string) (int, error) {
	fd, err := unix.Open(r.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: r.dir, Err: err}
	}
	for _, c := range strings.Split(strings.Trim(rel, "/"), "/") {
		if c == "" {
			continue
		}
		if c == "." || c == ".." {
			unix.Close(fd)
			return -1, fmt.Errorf("%s: unexpected %q component", rel, c)
		}
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return -1, fmt.Errorf("%s: %s is no longer a directory (changed since the plan?): %w", rel, c, err)
			}
			return -1, &fs.PathError{Op: "open", Path: rel, Err: err}
		}
		fd = next
	}
	return fd, nil
}

// at runs fn with the directory that holds rel open, and rel's last component. The root itself
// is "." in the root: "/" given to an *at call would be this machine's root, whatever the dirfd.
func (r *rootFS) at(rel string, fn func(dirfd int, name string) error) error {
	dir, name := path.Dir(rel), path.Base(rel)
	if rel == "/" {
		dir, name = "/", "."
	}
	dirfd, err := r.openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	return fn(dirfd, name)
}

// mkdir creates the directory rel (its parent exists) with exactly mode and, when given, owner.
// A directory already there is fine: a parent another step made, or a second run after a failure.
func (r *rootFS) mkdir(rel string, mode uint32, uid, gid *int) error {
	return r.at(rel, func(dirfd int, name string) error {
		if err := unix.Mkdirat(dirfd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return &fs.PathError{Op: "mkdir", Path: rel, Err: err}
		}
		return setAttrs(dirfd, name, rel, "dir", &mode, uid, gid)
	})
}

// setAttrs sets the owner, then the mode: chown(2) clears setuid and setgid, so the mode comes
// after it (as Ignition does). A nil field is left as it is. Files and directories are changed
// through a descriptor opened without following symlinks; a symlink's owner with
// AT_SYMLINK_NOFOLLOW (its mode means nothing on Linux).
func setAttrs(dirfd int, name, rel, kind string, mode *uint32, uid, gid *int) error {
	if mode == nil && uid == nil && gid == nil {
		return nil
	}
	u, g := -1, -1
	if uid != nil {
		u = *uid
	}
	if gid != nil {
		g = *gid
	}
	if kind == "link" {
		if err := unix.Fchownat(dirfd, name, u, g, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &fs.PathError{Op: "lchown", Path: rel, Err: err}
		}
		return nil
	}
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	if kind == "dir" {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	if u != -1 || g != -1 {
		if err := unix.Fchown(fd, u, g); err != nil {
			return &fs.PathError{Op: "chown", Path: rel, Err: err}
		}
	}
	if mode != nil {
		if err := unix.Fchmod(fd, *mode); err != nil {
			return &fs.PathError{Op: "chmod", Path: rel, Err: err}
		}
	}
	return nil
}

// put makes a new node at rel through a temporary name in the same directory (make creates it
// there), then renames it into place: a crash leaves the old node or the new one, never half of
// one. With replace, whatever is at rel is kept first as rel+backup — hard-linked when it is not a
// directory (the path never goes missing), moved aside when it is. Without replace, nothing may be
// at rel (RENAME_NOREPLACE): what appeared since the plan is not clobbered.
func (r *rootFS) put(rel string, replace bool, backup string, make func(dirfd int, tmp string) error) error {
	return r.at(rel, func(dirfd int, name string) error {
		tmp := "." + name + ".slipway-tmp"
		if len(tmp) > 255 {
			tmp = tmp[:255]
		}
		_ = unix.Unlinkat(dirfd, tmp, 0) // a leftover of an interrupted run
		if err := make(dirfd, tmp); err != nil {
			_ = unix.Unlinkat(dirfd, tmp, 0)
			return err
		}
		flags := uint(unix.RENAME_NOREPLACE)
		if replace {
			var st unix.Stat_t
			if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
				if st.Mode&unix.S_IFMT == unix.S_IFDIR {
					err = unix.Renameat2(dirfd, name, dirfd, name+backup, unix.RENAME_NOREPLACE)
				} else {
					err = unix.Linkat(dirfd, name, dirfd, name+backup, 0)
					flags = 0
				}
				if err != nil {
					_ = unix.Unlinkat(dirfd, tmp, 0)
					return fmt.Errorf("keeping %s as %s: %w", rel, name+backup, err)
				}
			}
		}
		if err := unix.Renameat2(dirfd, tmp, dirfd, name, flags); err != nil {
			_ = unix.Unlinkat(dirfd, tmp, 0)
			return &fs.PathError{Op: "rename", Path: rel, Err: err}
		}
		return nil
	})
}

// writeFile makes a regular file with data, mode and (when given) owner, synced before it is
// renamed into place.
func writeFile(data []byte, mode uint32, uid, gid *int) func(int, string) error {
	return func(dirfd int, tmp string) error {
		fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), tmp)
		if _, err := f.Write(data); err != nil {
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
		return setAttrs(dirfd, tmp, tmp, "file", &mode, uid, gid)
	}
}

func makeSymlink(target string, uid, gid *int) func(int, string) error {
	return func(dirfd int, tmp string) error {
		if err := unix.Symlinkat(target, dirfd, tmp); err != nil {
			return err
		}
		return setAttrs(dirfd, tmp, tmp, "link", nil, uid, gid)
	}
}

// makeHardlink links the node at targetRel itself (a symlink there is linked, not followed, as
// link(2) and Ignition do).
func (r *rootFS) makeHardlink(targetRel string) func(int, string) error {
	return func(dirfd int, tmp string) error {
		return r.at(targetRel, func(tdir int, tname string) error {
			return unix.Linkat(tdir, tname, dirfd, tmp, 0)
		})
	}
}

// moveAside renames rel to rel+backup, never over an existing file.
func (r *rootFS) moveAside(rel, backup string) error {
	return r.at(rel, func(dirfd int, name string) error {
		if err := unix.Renameat2(dirfd, name, dirfd, name+backup, unix.RENAME_NOREPLACE); err != nil {
			return &fs.PathError{Op: "rename", Path: rel, Err: err}
		}
		return nil
	})
}
