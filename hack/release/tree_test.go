package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gitRepo is a committed repository shaped enough like Slipway's for Build to reach its tree check:
// the chart's Chart.yaml, LICENSE, and a .gitignore.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	writeTree(t, repo, "deploy/helm/slipway/Chart.yaml", "name: slipway\n")
	writeTree(t, repo, "LICENSE", "Apache\n")
	writeTree(t, repo, ".gitignore", "dist/\nbuild.log\n")
	git(t, repo, "init", "-q")
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "release fixture")
	return repo
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=release test", "-c", "user.email=release@test.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func writeTree(t *testing.T, dir, name, data string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// earlierRelease is an -out directory holding a release Build would replace: a refusal that came
// after prepareOut would have deleted it.
func earlierRelease(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dist")
	writeTree(t, out, "install.yaml", "old release\n")
	writeTree(t, out, SumsFile, "0000  install.yaml\n")
	return out
}

// unchanged fails unless out still holds exactly the earlier release.
func unchanged(t *testing.T, out, when string) {
	t.Helper()
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatalf("%s: -out is gone: %v", when, err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{SumsFile, "install.yaml"}) {
		t.Errorf("%s: -out holds %v, want the earlier release untouched", when, names)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "install.yaml")); string(b) != "old release\n" {
		t.Errorf("%s: the earlier install.yaml now reads %q", when, b)
	}
}

// A release is its commit: a changed tracked file, a staged one, or an untracked file that is not
// ignored is refused, naming the paths and what to do, before -out is touched. Ignored files are no
// change.
func TestRefusesDirtyTree(t *testing.T) {
	repo := gitRepo(t)
	out := earlierRelease(t)
	args := []string{"-version", "v1.0.0", "-repo", repo, "-out", out}

	if paths, err := DirtyPaths(repo); err != nil || len(paths) != 0 {
		t.Fatalf("a fresh commit: %v %v", paths, err)
	}
	writeTree(t, repo, "build.log", "ignored\n")
	writeTree(t, repo, "dist/x", "ignored\n")
	if paths, err := DirtyPaths(repo); err != nil || len(paths) != 0 {
		t.Errorf("ignored files count as changes: %v %v", paths, err)
	}

	for _, c := range []struct {
		name   string
		change func()
		undo   func()
		want   []string
	}{
		{"a changed tracked file",
			func() { writeTree(t, repo, "LICENSE", "changed\n") },
			func() { git(t, repo, "checkout", "--", "LICENSE") },
			[]string{"1 paths: LICENSE"}},
		{"a staged change",
			func() { writeTree(t, repo, "LICENSE", "staged\n"); git(t, repo, "add", "LICENSE") },
			func() { git(t, repo, "reset", "-q", "--", "LICENSE"); git(t, repo, "checkout", "--", "LICENSE") },
			[]string{"LICENSE"}},
		{"an untracked file",
			func() { writeTree(t, repo, "deploy/notes.txt", "mine\n") },
			func() { os.Remove(filepath.Join(repo, "deploy/notes.txt")) },
			[]string{"deploy/notes.txt", "untracked files: commit, remove or .gitignore them"}},
		{"a deleted tracked file",
			func() { os.Remove(filepath.Join(repo, "LICENSE")) },
			func() { git(t, repo, "checkout", "--", "LICENSE") },
			[]string{"LICENSE"}},
		{"many untracked files: the first few, and how many more",
			func() {
				for i := range 7 {
					writeTree(t, repo, fmt.Sprintf("u%d", i), "x")
				}
			},
			func() {
				for i := range 7 {
					os.Remove(filepath.Join(repo, fmt.Sprintf("u%d", i)))
				}
			},
			[]string{"7 paths: u0, u1, u2, u3, u4 and 2 more"}},
	} {
		c.change()
		var stderr bytes.Buffer
		code := run(args, &stderr)
		msg := stderr.String()
		if code != exitError {
			t.Errorf("%s: exit %d, want %d (refused):\n%s", c.name, code, exitError, msg)
		}
		for _, w := range append([]string{"uncommitted changes", "commit or stash them", "-allow-dirty builds anyway, as v1.0.0-dirty"}, c.want...) {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: the refusal does not say %q:\n%s", c.name, w, msg)
			}
		}
		unchanged(t, out, c.name)
		c.undo()
		if paths, err := DirtyPaths(repo); err != nil || len(paths) != 0 {
			t.Fatalf("%s: undone, the tree still shows %v %v", c.name, paths, err)
		}
	}

	// -allow-dirty builds, and says so in the version every file and the image carry.
	writeTree(t, repo, "LICENSE", "changed\n")
	c := Config{Version: "v1.0.0", AllowDirty: true}
	note, err := checkTree(repo, &c)
	if err != nil || c.Version != "v1.0.0"+DirtySuffix || !strings.Contains(note, "LICENSE") {
		t.Errorf("-allow-dirty on a dirty tree: version %q, note %q, err %v", c.Version, note, err)
	}
	if !semver.MatchString(c.Version) || !strings.Contains(ImageName(c.Version), "-dirty") || !strings.Contains(ChartName(c.Version), "-dirty") {
		t.Errorf("%s: not a version the image tag and the chart take, or not visible in the file names", c.Version)
	}
	git(t, repo, "checkout", "--", "LICENSE")
	c = Config{Version: "v1.0.0-rc.1", AllowDirty: true}
	if note, err := checkTree(repo, &c); err != nil || c.Version != "v1.0.0-rc.1" || note != "" {
		t.Errorf("-allow-dirty on a clean tree: version %q, note %q, err %v (want the version as given)", c.Version, note, err)
	}
}

// Outside a git checkout nothing shows the tree is a commit: refused, and -allow-dirty marks it.
func TestRefusesTreeWithoutGit(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir)) // no repository above the temporary directory counts
	writeTree(t, dir, "deploy/helm/slipway/Chart.yaml", "name: slipway\n")
	out := earlierRelease(t)
	var stderr bytes.Buffer
	if code := run([]string{"-version", "v1.0.0", "-repo", dir, "-out", out}, &stderr); code != exitError || !strings.Contains(stderr.String(), "cannot show that") {
		t.Errorf("no git checkout: exit %d:\n%s", code, stderr.String())
	}
	unchanged(t, out, "no git checkout")
	c := Config{Version: "v1.0.0", AllowDirty: true}
	if _, err := checkTree(dir, &c); err != nil || c.Version != "v1.0.0"+DirtySuffix {
		t.Errorf("no git checkout, -allow-dirty: %q %v", c.Version, err)
	}
}
