package testenv

import (
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
)

// The tap sees every line with its logger's name and values (at any verbosity), Wait finds lines
// only after the mark, and every line still reaches the logger it wraps (at that logger's verbosity).
func TestLogTap(t *testing.T) {
	var forwarded []string
	next := funcr.New(func(prefix, args string) { forwarded = append(forwarded, prefix+" "+args) }, funcr.Options{Verbosity: 0})
	var tap LogTap
	log := tap.Logger(next).WithName("agent").WithValues("simnode", "n-0")
	log.Info("node side", "state", "asking")
	mark := tap.Mark()
	log.V(2).Info("node side", "state", "held")
	log.Error(nil, "failed", "try", 2)
	l := tap.Wait(t, mark, time.Second, "held", func(l LogLine) bool { return l.Msg == "node side" })
	if l.Values["state"] != "held" || l.Values["simnode"] != "n-0" || l.Name != "agent" || l.Seq != 2 {
		t.Errorf("line %v", l)
	}
	if l := tap.Wait(t, 0, time.Second, "asking", func(l LogLine) bool { return l.Values["state"] == "asking" }); l.Seq != 1 {
		t.Errorf("line %v", l)
	}
	if len(forwarded) != 2 { // the V(2) line is below next's verbosity
		t.Errorf("forwarded %q", forwarded)
	}
}
