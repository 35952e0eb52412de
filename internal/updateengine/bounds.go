package updateengine

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds on the strings update_engine hands us. They end up in Node annotations, whose total size the
// API server caps at 256 KiB: one oversized new_version would make every PATCH the agent sends fail,
// reboot-in-progress included, and a drained, granted node would never reboot.
const (
	// MaxOperationLen bounds current_operation. update_engine's longest status word,
	// UPDATE_STATUS_REPORTING_ERROR_EVENT, is 35 bytes.
	MaxOperationLen = 64
	// MaxVersionLen bounds new_version, CutMark included. Flatcar's versions look like "4593.2.5".
	MaxVersionLen = 128
	// CutMark ends a new_version that was shortened to MaxVersionLen, so that whoever reads the
	// new-version annotation sees that it is not the whole string.
	CutMark = "...[cut]"
)

// checkOperation refuses a current_operation that is not a status word: empty, longer than
// MaxOperationLen, or with a byte outside [A-Z0-9_]. A word update_engine does not have (yet) is
// fine; it reports as is and never counts as "needs reboot". Garbage is refused rather than cut,
// because cutting could turn it into a real status word.
func checkOperation(op string) error {
	if op == "" {
		return fmt.Errorf("current_operation is empty")
	}
	if len(op) > MaxOperationLen {
		return fmt.Errorf("current_operation is %d bytes (starting %q), longer than any status word (at most %d)", len(op), op[:32], MaxOperationLen)
	}
	for i := 0; i < len(op); i++ {
		if c := op[i]; !('A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return fmt.Errorf("current_operation %q is not a status word: byte %q at %d is not in [A-Z0-9_]", op, c, i)
		}
	}
	return nil
}

// fitVersion makes new_version fit a Node annotation for people to read: valid UTF-8 of printable
// characters (each invalid byte or non-printable character becomes U+FFFD) and at most MaxVersionLen
// bytes (a longer one is cut at a character boundary and ends in CutMark). note says what it changed,
// "" when nothing.
func fitVersion(v string) (fitted, note string) {
	var b strings.Builder
	replaced, cut := 0, false
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRuneInString(v[i:])
		i += size
		if r == utf8.RuneError && size == 1 || !unicode.IsPrint(r) {
			r = utf8.RuneError
			replaced++
		}
		if b.Len()+utf8.RuneLen(r) > MaxVersionLen {
			cut = true
			break
		}
		b.WriteRune(r)
	}
	fitted = b.String()
	var notes []string
	if cut {
		keep := MaxVersionLen - len(CutMark)
		for keep > 0 && !utf8.RuneStart(fitted[keep]) {
			keep--
		}
		fitted = fitted[:keep] + CutMark
		notes = append(notes, fmt.Sprintf("new_version is %d bytes, cut to %d", len(v), len(fitted)))
	}
	if replaced > 0 {
		notes = append(notes, fmt.Sprintf("%d invalid or non-printable characters in new_version replaced with U+FFFD", replaced))
	}
	return fitted, strings.Join(notes, "; ")
}
