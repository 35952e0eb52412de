package protocol

import (
	"fmt"
	"regexp"
	"strconv"
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

// CompareVersions orders two OS versions as Flatcar numbers them ("4152.2.3"): part by part, numbers
// as numbers, anything else (a build suffix after "+" or "-") as text; "" is older than any version.
// It returns -1, 0 or 1.
func CompareVersions(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" {
		return -1
	}
	if b == "" {
		return 1
	}
	split := func(v string) []string {
		return strings.FieldsFunc(v, func(r rune) bool { return r == '.' || r == '+' || r == '-' })
	}
	pa, pb := split(a), split(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, errA := strconv.ParseUint(pa[i], 10, 64)
		nb, errB := strconv.ParseUint(pb[i], 10, 64)
		switch {
		case errA == nil && errB == nil && na != nb:
			if na < nb {
				return -1
			}
			return 1
		case errA == nil && errB == nil:
		case errA == nil: // a number against text (a build suffix): the number sorts later
			return 1
		case errB == nil:
			return -1
		case pa[i] != pb[i]:
			if pa[i] < pb[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(pa) < len(pb):
		return -1
	case len(pa) > len(pb):
		return 1
	}
	return strings.Compare(a, b)
}
