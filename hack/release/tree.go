package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// DirtySuffix marks the version of a release built from uncommitted changes (-allow-dirty). A
// SemVer pre-release part, not "+dirty" build metadata: image tags refuse '+', and the image, the
// chart and every file name carry the version. v0.4.0-dirty sorts before v0.4.0, as it should.
const DirtySuffix = "-dirty"

// dirtyShown is how many dirty paths a refusal names.
const dirtyShown = 5

// DirtyPaths are the paths of repo's working tree that its commit does not hold: changes to tracked
// files, staged or not, and untracked files that are not ignored. Empty: the tree is its commit.
func DirtyPaths(repo string) ([]string, error) {
	cmd := exec.Command("git", "-C", repo, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=none")
	// git status refreshes the index when it may; another git in the same checkout would then find
	// index.lock taken. Looking must not lock.
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git status in %s: %v: %s", repo, err, strings.TrimSpace(stderr.String()))
	}
	var paths []string
	entries := strings.Split(string(out), "\x00")
	for i := 0; i < len(entries); i++ {
		e := entries[i]
		if len(e) < 4 {
			continue
		}
		paths = append(paths, e[3:])
		if e[0] == 'R' || e[0] == 'C' {
			i++ // a rename's or copy's source follows as an entry of its own
		}
	}
	return paths, nil
}

// checkTree refuses a release from a working tree that is not its commit, unless c.AllowDirty; then
// it marks c.Version with DirtySuffix (when the tree is dirty, or not a git checkout and so cannot
// be shown clean). It returns what to tell the person building, empty when the tree is clean.
func checkTree(repo string, c *Config) (string, error) {
	paths, err := DirtyPaths(repo)
	if err != nil {
		if !c.AllowDirty {
			return "", fmt.Errorf("cannot show that %s is a clean commit (%v): a release is built from a git checkout with nothing uncommitted; -allow-dirty builds anyway, as %s%s (development and tests only)", repo, err, c.Version, DirtySuffix)
		}
		c.Version += DirtySuffix
		return fmt.Sprintf("not a clean git checkout (%v): building %s (-allow-dirty)", err, c.Version), nil
	}
	if len(paths) == 0 {
		return "", nil
	}
	shown := strings.Join(paths[:min(len(paths), dirtyShown)], ", ")
	if len(paths) > dirtyShown {
		shown += fmt.Sprintf(" and %d more", len(paths)-dirtyShown)
	}
	if !c.AllowDirty {
		return "", fmt.Errorf("%s has uncommitted changes (%d paths: %s): a release must be exactly its commit, so commit or stash them (untracked files: commit, remove or .gitignore them) and run again; `git status` lists them. -allow-dirty builds anyway, as %s%s (development and tests only)",
			repo, len(paths), shown, c.Version, DirtySuffix)
	}
	c.Version += DirtySuffix
	return fmt.Sprintf("building %s from uncommitted changes (-allow-dirty; %d paths: %s)", c.Version, len(paths), shown), nil
}
