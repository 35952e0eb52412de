// Package logformat is kured's --log-format for both binaries: "text", klog's own lines (the default),
// or "json", one JSON object per line through log/slog (time, level, msg, logger and each key/value),
// for log pipelines that parse JSON. klog's -v still says how much is logged.
package logformat

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"k8s.io/klog/v2"
)

// Formats are the values --log-format takes (kured's).
var Formats = []string{"text", "json"}

// AddFlag defines --log-format on fs.
func AddFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "log-format", "text", `"text" (klog's lines) or "json" (one JSON object per line: time, level, msg, logger and the values); kured's flag, kured's values`)
}

// Check refuses a value that is not one of Formats.
func Check(format string) error {
	for _, f := range Formats {
		if format == f {
			return nil
		}
	}
	return fmt.Errorf("log-format %q: want \"text\" or \"json\"", format)
}

// Apply makes every log line of the process (klog's API and its loggers) take format, written to w,
// as verbose as fs's -v says (klog's verbosity; V(n) lines are slog level -n).
func Apply(format string, fs *flag.FlagSet, w io.Writer) error {
	if err := Check(format); err != nil {
		return err
	}
	if format != "json" {
		return nil
	}
	v := 0
	if f := fs.Lookup("v"); f != nil {
		v, _ = strconv.Atoi(f.Value.String())
	}
	klog.SetSlogLogger(slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.Level(-v)})))
	return nil
}
