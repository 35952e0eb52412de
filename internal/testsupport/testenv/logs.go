package testenv

import (
	"flag"
	"io"
	"os"
	"strings"

	"k8s.io/klog/v2"
)

// KlogTo sends klog's output (the in-process agents', informers', client-go's) to w only, so that a
// command's own progress lines stay readable on the terminal; restore with KlogTo(io.Discard) or
// another writer.
func KlogTo(w io.Writer) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(w)
}

// LogTail is the last lines of a log file on one line, for error messages about the process that
// wrote it.
func LogTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}
