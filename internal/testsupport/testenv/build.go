package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// GoBuild runs `go build args...` in dir ("" for the working directory), for the tests and tools that
// need a real binary (a process to SIGKILL, an exit code, a CLI without a kubeconfig). Refused under
// -short, like every other real part: the fast tier builds no binaries.
func GoBuild(ctx context.Context, dir string, args ...string) error {
	if err := RefuseUnderShort("go build " + strings.Join(args, " ")); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
