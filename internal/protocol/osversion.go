package protocol

import (
	"fmt"
	"strings"
)

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
