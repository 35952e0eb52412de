package testenv

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// LogTap records every line a component logs (its message and key/value pairs, WithValues included,
// at every verbosity) and passes each on to the logger it wraps. Tests wait on it for a component's
// own word that it looked at something ("node side" state=held, "honouring it", ...) before they
// assert that nothing else happened, instead of sleeping and hoping it looked meanwhile.
type LogTap struct {
	mu      sync.Mutex
	lines   []LogLine
	changed chan struct{} // closed and replaced on every line
}

// LogLine is one recorded line. Seq numbers lines from 1 in the order they were logged.
type LogLine struct {
	Seq    int
	Name   string // the logger's name (WithName parts joined with "/")
	Msg    string
	Values map[string]string // fmt.Sprint of each value; later keys win
	Err    error
}

func (l LogLine) String() string {
	var kv []string
	for k, v := range l.Values {
		kv = append(kv, k+"="+v)
	}
	return fmt.Sprintf("#%d %s %q %s", l.Seq, l.Name, l.Msg, strings.Join(kv, " "))
}

// Logger returns next with every line also recorded in the tap.
func (t *LogTap) Logger(next logr.Logger) logr.Logger {
	// next is already initialised, and its sink may be shared (klog.Background() is one klogger for
	// the whole process): it gets a copy one frame deeper, never a second Init, which would write
	// into the shared sink while other goroutines log through it.
	return logr.New(&tapSink{tap: t, next: next.WithCallDepth(1).GetSink()})
}

// Mark is the Seq of the last line so far: Wait(after=Mark()) sees only lines logged from now on.
func (t *LogTap) Mark() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.lines)
}

// Wait returns the first line after Seq after that match accepts, failing tb after timeout (with the
// last lines seen, to say what the component did instead).
func (t *LogTap) Wait(tb testing.TB, after int, timeout time.Duration, what string, match func(LogLine) bool) LogLine {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	next := after
	for {
		t.mu.Lock()
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		lines, changed := t.lines[next:], t.changed
		t.mu.Unlock()
		for _, l := range lines {
			if match(l) {
				return l
			}
		}
		next += len(lines)
		select {
		case <-changed:
		case <-deadline.C:
			t.mu.Lock()
			last := t.lines[max(after, len(t.lines)-10):]
			t.mu.Unlock()
			var b strings.Builder
			for _, l := range last {
				b.WriteString("\n  " + l.String())
			}
			tb.Fatalf("%s: not logged within %s; last lines:%s", what, timeout, b.String())
			return LogLine{}
		}
	}
}

func (t *LogTap) add(name, msg string, err error, kvs ...[]any) {
	values := map[string]string{}
	for _, kv := range kvs {
		for i := 0; i+1 < len(kv); i += 2 {
			values[fmt.Sprint(kv[i])] = fmt.Sprint(kv[i+1])
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, LogLine{Seq: len(t.lines) + 1, Name: name, Msg: msg, Values: values, Err: err})
	if t.changed != nil {
		close(t.changed)
	}
	t.changed = make(chan struct{})
}

// tapSink records into tap and forwards to next (when next logs at that verbosity).
type tapSink struct {
	tap    *LogTap
	next   logr.LogSink
	name   string
	values []any
}

func (s *tapSink) Init(logr.RuntimeInfo) {}

func (s *tapSink) Enabled(int) bool { return true }

func (s *tapSink) Info(level int, msg string, kv ...any) {
	s.tap.add(s.name, msg, nil, s.values, kv)
	if s.next != nil && s.next.Enabled(level) {
		s.next.Info(level, msg, kv...)
	}
}

func (s *tapSink) Error(err error, msg string, kv ...any) {
	s.tap.add(s.name, msg, err, s.values, kv)
	if s.next != nil {
		s.next.Error(err, msg, kv...)
	}
}

func (s *tapSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = append(append([]any(nil), s.values...), kv...)
	if s.next != nil {
		c.next = s.next.WithValues(kv...)
	}
	return &c
}

func (s *tapSink) WithName(name string) logr.LogSink {
	c := *s
	if c.name == "" {
		c.name = name
	} else {
		c.name += "/" + name
	}
	if s.next != nil {
		c.next = s.next.WithName(name)
	}
	return &c
}
