package harness

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAgent answers the guest-agent protocol on a unix socket as qemu-guest-agent does: guest-sync
// echoes its id, guest-exec starts pid 7, guest-exec-status says exited once the command has "run"
// for runFor. stale is written first on every connection (answers a previous client left unread);
// stall makes it stop answering after the sync.
type fakeAgent struct {
	runFor time.Duration
	stale  string
	stall  bool
	polls  atomic.Int32
}

func (f *fakeAgent) serve(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "qga.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.handle(c)
		}
	}()
	return sock
}

func (f *fakeAgent) handle(c net.Conn) {
	defer c.Close()
	if f.stale != "" {
		_, _ = c.Write([]byte(f.stale))
	}
	r := bufio.NewReader(c)
	var started time.Time
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req struct {
			Execute   string          `json:"execute"`
			Arguments json.RawMessage `json:"arguments"`
		}
		_ = json.Unmarshal(line, &req)
		var ret interface{}
		switch req.Execute {
		case "guest-sync":
			var a struct{ ID int64 }
			_ = json.Unmarshal(req.Arguments, &a)
			ret = a.ID
		case "guest-ping":
			ret = map[string]interface{}{}
		case "guest-exec":
			if f.stall {
				select {} // the agent hangs: no answer ever
			}
			started = time.Now()
			ret = map[string]int{"pid": 7}
		case "guest-exec-status":
			f.polls.Add(1)
			if time.Since(started) < f.runFor {
				ret = map[string]bool{"exited": false}
			} else {
				ret = map[string]interface{}{"exited": true, "exitcode": 0, "out-data": base64.StdEncoding.EncodeToString([]byte("done\n"))}
			}
		}
		b, _ := json.Marshal(map[string]interface{}{"return": ret})
		_, _ = c.Write(append(b, '\n'))
	}
}

func shortRequests(t *testing.T, d time.Duration) {
	old := qgaRequestTimeout
	qgaRequestTimeout = d
	t.Cleanup(func() { qgaRequestTimeout = old })
}

// A command that runs longer than one request's deadline (today's daemon-reload under TCG: ~20 s
// against the old single 60-s deadline for a 51-s script) passes: each request is bounded, not the
// command.
func TestGuestExecOutlivesTheRequestDeadline(t *testing.T) {
	shortRequests(t, 300*time.Millisecond)
	f := &fakeAgent{runFor: 1500 * time.Millisecond}
	out, err := guestExec(context.Background(), f.serve(t), nil, "/bin/sh", []string{"-c", "slow"})
	if err != nil || out != "done\n" {
		t.Fatalf("guestExec = %q, %v; want done", out, err)
	}
	if f.polls.Load() < 2 {
		t.Fatalf("the command exited after %d status polls; the test wants one that outlives a request", f.polls.Load())
	}
}

// A command past its budget says it is still running in the guest, with its pid.
func TestGuestExecBudgetSaysStillRunning(t *testing.T) {
	shortRequests(t, 300*time.Millisecond)
	f := &fakeAgent{runFor: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := guestExec(ctx, f.serve(t), nil, "/bin/sh", []string{"-c", "forever"})
	if !errors.Is(err, ErrStillRunning) || !strings.Contains(err.Error(), "pid 7") {
		t.Fatalf("err = %v; want ErrStillRunning naming pid 7", err)
	}
}

// An agent that stops answering fails the request within its deadline, and the error is not
// mistaken for a command still running.
func TestGuestExecAgentSilent(t *testing.T) {
	shortRequests(t, 300*time.Millisecond)
	f := &fakeAgent{stall: true}
	_, err := guestExec(context.Background(), f.serve(t), nil, "/bin/true", nil)
	if err == nil || errors.Is(err, ErrStillRunning) || !strings.Contains(err.Error(), "guest agent guest-exec: no answer") {
		t.Fatalf("err = %v; want the agent's silence named", err)
	}
}

// Answers a previous client left unread (it gave up mid-request) are skipped: the sync waits for its
// own id, so the exec's answer is not mistaken for a stale status.
func TestGuestExecSkipsStaleAnswers(t *testing.T) {
	shortRequests(t, 2*time.Second)
	f := &fakeAgent{stale: `{"return": 4242}` + "\n" + `{"error": {"class": "GenericError", "desc": "a previous client's"}}` + "\n" + `{"return": {"exited": true, "exitcode": 3}}` + "\n"}
	out, err := guestExec(context.Background(), f.serve(t), nil, "/bin/true", nil)
	if err != nil || out != "done\n" {
		t.Fatalf("guestExec = %q, %v; want done", out, err)
	}
	if err := guestPing(context.Background(), f.serve(t)); err != nil {
		t.Fatalf("guestPing: %v", err)
	}
}
