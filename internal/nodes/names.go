package nodes

import (
	"fmt"
	"strings"
)

// Names lists up to n node names for a message a person reads, then how many more.
func Names(all []string, n int) string {
	if len(all) <= n {
		return strings.Join(all, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(all[:n], ", "), len(all)-n)
}
