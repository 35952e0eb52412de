package testenv

import (
	"flag"
	"io"

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
