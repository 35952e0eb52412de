// Package updateconf reads and edits Flatcar's /etc/flatcar/update.conf, the file whose GROUP= and
// SERVER= lines tell update_engine which channel to follow and which Omaha server to ask. update_engine
// reads /usr/share/flatcar/update.conf (the image's defaults) and then this file, key by key, at every
// update check; so a change here takes effect at the next check, without a reboot.
//
// The file may be the user's own (Ignition, a config-management tool, a hand edit). Slipway edits it
// only when it is Slipway's to edit: it does not exist yet, or it carries the Marker line. Every other
// line is kept as it is.
package updateconf

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Path is update.conf's path relative to the host root.
const Path = "etc/flatcar/update.conf"

// Marker is the line that makes an existing update.conf Slipway's to edit. Slipway writes it first in a
// file it creates; a user who wants Slipway to set GROUP and SERVER in a file of their own adds it.
const Marker = "# managed-by: slipway (GROUP and SERVER follow the node's RebootPolicy)"

// markerPrefix is what identifies the Marker line, so the explanation after it may change.
const markerPrefix = "# managed-by: slipway"

// MaxServerLen bounds a server URL (an annotation value and one line of a file).
const MaxServerLen = 512

// Settings are the keys a pool declares; "" leaves that key as the file has it.
type Settings struct {
	Group  string `json:"group,omitempty"`
	Server string `json:"server,omitempty"`
}

// Empty reports whether s declares nothing.
func (s Settings) Empty() bool { return s.Group == "" && s.Server == "" }

// ErrNotManaged is returned by Edit when the file exists, needs a change, and lacks the Marker.
var ErrNotManaged = errors.New("/" + Path + " exists and is not Slipway's to edit (no line " + `"` + markerPrefix + `"` + "); add that line to let Slipway set GROUP and SERVER, or leave the pool's update settings empty to keep the file as it is")

// ValidGroup checks a GROUP value: Flatcar's channels (stable, beta, alpha, lts) and Nebraska's group
// names and ids all fit a Kubernetes label value, which the agent reports it as.
func ValidGroup(g string) error {
	if g == "" {
		return errors.New("group is empty")
	}
	if errs := validation.IsValidLabelValue(g); len(errs) > 0 {
		return fmt.Errorf("group %q: %s", g, strings.Join(errs, "; "))
	}
	return nil
}

// ValidServer checks a SERVER value: an absolute https URL (http only when allowHTTP) with a host and
// nothing a line of update.conf cannot carry unquoted. Flatcar's payloads are signed with a key built
// into the image, so a server can withhold updates but not forge them; plain http still lets anyone
// on the path withhold or delay them, which is why it must be asked for.
func ValidServer(s string, allowHTTP bool) error {
	if s == "" {
		return errors.New("server is empty")
	}
	if len(s) > MaxServerLen {
		return fmt.Errorf("server is %d bytes long, at most %d", len(s), MaxServerLen)
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == '"' || r == '\'' || r == '\\' || r == '`' || r == '$' || r == '#' {
			return fmt.Errorf("server %q: contains %q, which a line of update.conf cannot carry", s, r)
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("server %q: %w", s, err)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	case u.Scheme == "http":
		return fmt.Errorf("server %q: plain http is refused (start the operator with --allow-http-update-server to allow it)", s)
	default:
		return fmt.Errorf("server %q: want an https:// URL", s)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("server %q: no host", s)
	}
	if u.User != nil {
		return fmt.Errorf("server %q: credentials in the URL are refused (they would be readable on every Node object)", s)
	}
	return nil
}

// Validate checks every key s declares.
func (s Settings) Validate(allowHTTP bool) error {
	var errs []error
	if s.Group != "" {
		errs = append(errs, ValidGroup(s.Group))
	}
	if s.Server != "" {
		errs = append(errs, ValidServer(s.Server, allowHTTP))
	}
	return errors.Join(errs...)
}

// Read returns the GROUP and SERVER one update.conf sets as update_engine reads it, and whether it
// carries the Marker. update_engine's key-value parser (simple_key_value_store) splits each line at
// its first '=' and trims nothing: `GROUP="beta"` sets the group `"beta"` quotes included, and
// ` GROUP=beta` or `GROUP =beta` set no GROUP at all. Read does the same, so a line in any other form
// never counts as already saying what a pool declares (Edit rewrites it, or refuses the user's file).
// The last line of a key wins.
func Read(content []byte) (set Settings, managed bool) {
	for _, line := range lines(content) {
		if isMarker(line) {
			managed = true
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok:
		case k == "GROUP":
			set.Group = v
		case k == "SERVER":
			set.Server = v
		}
	}
	return set, managed
}

// isMarker: the line is the Marker (or its prefix alone, or followed by a space and any text).
func isMarker(line string) bool {
	t := strings.TrimSpace(line)
	return t == markerPrefix || strings.HasPrefix(t, markerPrefix+" ")
}

// Edit returns update.conf's new content so that it sets what want declares, and whether that differs
// from content. exists is false when there is no file yet (content is then ignored): the new file
// starts with the Marker. A file that exists without the Marker is never changed: ErrNotManaged, unless
// it already says what want says. The first line of each key is replaced in place and later ones
// (which would override it) removed; a missing key is appended; every other line is kept byte for byte.
func Edit(content []byte, exists bool, want Settings) ([]byte, bool, error) {
	if !exists {
		content = nil
	}
	have, managed := Read(content)
	if (want.Group == "" || want.Group == have.Group) && (want.Server == "" || want.Server == have.Server) {
		return content, false, nil
	}
	if exists && !managed {
		return content, false, ErrNotManaged
	}
	wanted := map[string]string{}
	if want.Group != "" {
		wanted["GROUP"] = want.Group
	}
	if want.Server != "" {
		wanted["SERVER"] = want.Server
	}
	var out bytes.Buffer
	if !exists {
		out.WriteString(Marker + "\n")
	}
	done := map[string]bool{}
	for _, line := range lines(content) {
		if k, _, ok := keyValue(strings.TrimSpace(line)); ok {
			if v, mine := wanted[k]; mine {
				if !done[k] {
					out.WriteString(k + "=" + v + "\n")
					done[k] = true
				}
				continue
			}
		}
		out.WriteString(line + "\n")
	}
	for _, k := range []string{"GROUP", "SERVER"} {
		if v, mine := wanted[k]; mine && !done[k] {
			out.WriteString(k + "=" + v + "\n")
		}
	}
	return out.Bytes(), true, nil
}

// lines splits content into lines without their newlines; a last line without one counts.
func lines(content []byte) []string {
	s := strings.TrimSuffix(string(content), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// keyValue reads a KEY=VALUE line (one level of quotes removed); comments and other lines are not.
func keyValue(t string) (string, string, bool) {
	if t == "" || strings.HasPrefix(t, "#") {
		return "", "", false
	}
	k, v, ok := strings.Cut(t, "=")
	if !ok {
		return "", "", false
	}
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
	}
	return strings.TrimSpace(k), v, true
}

// ImagePath is the image's own update.conf, relative to the host root: the defaults Path overrides.
const ImagePath = "usr/share/flatcar/update.conf"

// Effective is what update_engine follows under root: ImagePath's GROUP and SERVER, each overridden by
// Path's when it sets one. A missing or unreadable file counts as empty.
func Effective(root string) Settings {
	var set Settings
	for _, p := range []string{ImagePath, Path} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			continue
		}
		s, _ := Read(b)
		if s.Group != "" {
			set.Group = s.Group
		}
		if s.Server != "" {
			set.Server = s.Server
		}
	}
	return set
}
