package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/slipway-dev/slipway/internal/protocol"
	"github.com/slipway-dev/slipway/internal/updateconf"
)

// HostInfo is what the agent labels its Node with: the OS id and version from os-release and the
// update group from update.conf.
type HostInfo struct {
	ID      string
	Version string
	Group   string
	// Server is update.conf's SERVER (/etc over /usr), bounded; "" when no file sets one.
	Server string
	// HaveOS and HaveGroup say which of the above were read; labels of unread ones are left alone.
	// HaveConf: some update.conf was read (so an empty Server means none sets one).
	HaveOS    bool
	HaveGroup bool
	HaveConf  bool
}

// Where Flatcar keeps these files, relative to the host root. update.conf in /etc overrides the one in
// /usr; /etc/coreos is where Container Linux Configs (and old nodes) write it.
var (
	osReleasePaths  = []string{"etc/os-release", "usr/lib/os-release"}
	updateConfPaths = []string{"usr/share/flatcar/update.conf", "etc/coreos/update.conf", "etc/flatcar/update.conf"}
)

// ReadHostInfo reads os-release and update.conf under root. It never fails as a whole: each file that
// is missing or unreadable is reported in problems and its labels are left out; values are sanitized
// into valid label values.
func ReadHostInfo(root string) (HostInfo, []error) {
	var info HostInfo
	var problems []error

	osr, err := readFirst(root, osReleasePaths)
	if err != nil {
		problems = append(problems, fmt.Errorf("os-release: %w", err))
	} else {
		info.ID = SanitizeLabelValue(osr["ID"])
		info.Version = SanitizeLabelValue(osr["VERSION"])
		info.HaveOS = true
	}
	// Later files override earlier ones, key by key.
	found := false
	for _, p := range updateConfPaths {
		kv, err := readKV(filepath.Join(root, p))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("update.conf: %w", err))
			continue
		}
		found = true
		if g, ok := kv["GROUP"]; ok {
			info.Group = SanitizeLabelValue(g)
			info.HaveGroup = true
		}
		if sv, ok := kv["SERVER"]; ok && len(sv) <= updateconf.MaxServerLen {
			info.Server = sv
		}
	}
	if !found {
		problems = append(problems, fmt.Errorf("update.conf: none of %v under %s", updateConfPaths, root))
	}
	info.HaveConf = found
	return info, problems
}

func readFirst(root string, paths []string) (map[string]string, error) {
	var firstErr error
	for _, p := range paths {
		kv, err := readKV(filepath.Join(root, p))
		if err == nil {
			return kv, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// readKV parses shell-style KEY=VALUE lines, as os-release(5) and update.conf use: comments, blank
// lines and lines without '=' are skipped; one level of single or double quotes is removed.
func readKV(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		kv[strings.TrimSpace(k)] = unquote(strings.TrimSpace(v))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return kv, nil
}

func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// SanitizeLabelValue turns s into a valid Kubernetes label value (protocol.LabelValue).
func SanitizeLabelValue(s string) string { return protocol.LabelValue(s) }
