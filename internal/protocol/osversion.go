package protocol

import (
	"fmt"
	"regexp"
	"strings"
)

var invalidLabelChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// LabelValue turns s into a valid Kubernetes label value: characters outside [A-Za-z0-9._-] become
// '-', at most 63 characters, starting and ending alphanumeric. It may return "" (valid). The agent
// writes its os-release fields through it.
func LabelValue(s string) string {
	s = invalidLabelChars.ReplaceAllString(s, "-")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.TrimFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
}

// NormalVersion is the one form OS versions are compared and kept in: the version label's (LabelValue).
// update_engine's new-version is raw ("4593.2.5+dev-1") and the agent's version label sanitized
// ("4593.2.5-dev-1"): compared raw, a good reboot into such a build read as one back on its old version.
func NormalVersion(v string) string { return LabelValue(v) }

// ValidVersion checks an OS version a person names (kubectl slipway resume --version): what
// update_engine reports (new-version) and the agent labels (version), e.g. 4593.2.5 or a build such as
// 4593.2.5+dev-1. A name outside that shape is refused rather than recorded as a resume nothing matches.
func ValidVersion(v string) error {
	if v == "" || len(v) > 128 {
		return fmt.Errorf("want 1 to 128 characters, got %d", len(v))
	}
	if i := strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._+-", r))
	}); i >= 0 {
		return fmt.Errorf("character %q at %d: an OS version has only letters, digits and . _ + -", v[i], i)
	}
	return nil
}
