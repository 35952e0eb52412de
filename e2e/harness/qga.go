package harness

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"time"
)

// Two clocks bound a guest command, because they fail for different reasons. Each request to the
// guest agent (one JSON line out, one back) gets qgaRequestTimeout: the agent answers within
// seconds even on a loaded TCG guest, so a request that takes longer means the agent or the socket
// is gone. The command itself gets its own budget (the caller's context deadline, else
// DefaultCommandBudget): under TCG one `systemctl daemon-reload` takes ~20 s on today's node image,
// and a script of several of them runs for a minute while the agent keeps answering. One deadline for
// both (what the harness had) turned a slow command into "i/o timeout" on the next poll.
var qgaRequestTimeout = 30 * time.Second // a var: the protocol tests shorten it

// DefaultCommandBudget bounds a guest command when the caller's context has no deadline.
const DefaultCommandBudget = 5 * time.Minute

// ErrStillRunning says a guest command outlived its budget: the guest agent answered, the command
// had not exited, and it goes on in the guest (the agent cannot stop it).
var ErrStillRunning = errors.New("still running in the guest")

// qgaConn is one connection to a guest agent socket, every request bounded on its own.
type qgaConn struct {
	conn       net.Conn
	r          *bufio.Reader
	ctx        context.Context
	skipErrors bool // while syncing: error answers belong to a previous client
}

func dialQGA(ctx context.Context, sock string) (*qgaConn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("guest agent socket: %w", err)
	}
	q := &qgaConn{conn: conn, r: bufio.NewReader(conn), ctx: ctx}
	// The agent answers in line order; a previous client may have left answers unread (it gave up
	// mid-request). guest-sync with a fresh id, read until that id comes back: everything before it
	// is someone else's.
	id := rand.Int63n(1 << 40)
	q.skipErrors = true // an error answer now is a previous client's
	defer func() { q.skipErrors = false }()
	if err := q.call("guest-sync", map[string]int64{"id": id}, func(raw json.RawMessage) (bool, error) {
		var got int64
		if json.Unmarshal(raw, &got) != nil || got != id {
			return false, nil // a stale answer: keep reading
		}
		return true, nil
	}); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

func (q *qgaConn) Close() error { return q.conn.Close() }

// call sends one request and reads lines until accept takes a return value (or the agent answers
// with an error). The request's deadline is qgaRequestTimeout, never later than the context's.
func (q *qgaConn) call(cmd string, arguments interface{}, accept func(json.RawMessage) (bool, error)) error {
	dl := time.Now().Add(qgaRequestTimeout)
	if cdl, ok := q.ctx.Deadline(); ok && cdl.Before(dl) {
		dl = cdl
	}
	_ = q.conn.SetDeadline(dl)
	req := map[string]interface{}{"execute": cmd}
	if arguments != nil {
		req["arguments"] = arguments
	}
	b, _ := json.Marshal(req)
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("guest agent %s: %w", cmd, err)
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("guest agent %s: no answer: %w", cmd, err)
		}
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Desc string `json:"desc"`
			} `json:"error"`
		}
		if json.Unmarshal(line, &resp) != nil {
			continue
		}
		if resp.Error != nil {
			if q.skipErrors {
				continue
			}
			return fmt.Errorf("guest agent %s: %s", cmd, resp.Error.Desc)
		}
		if resp.Return != nil {
			ok, err := accept(resp.Return)
			if err != nil || ok {
				return err
			}
		}
	}
}

func into(out interface{}) func(json.RawMessage) (bool, error) {
	return func(raw json.RawMessage) (bool, error) { return true, json.Unmarshal(raw, out) }
}

// guestPing asks the guest agent whether it answers (one request, no command run).
func guestPing(ctx context.Context, sock string) error {
	q, err := dialQGA(ctx, sock)
	if err != nil {
		return err
	}
	defer q.Close()
	return q.call("guest-ping", nil, func(json.RawMessage) (bool, error) { return true, nil })
}

// guestExec speaks the qemu-guest-agent protocol (JSON over the virtio-serial socket): guest-exec,
// then guest-exec-status until the process exited. No SSH, no network needed. The command's budget
// is ctx's deadline, else DefaultCommandBudget; when it runs out the error wraps ErrStillRunning and
// names the guest's pid.
func guestExec(ctx context.Context, sock string, stdin []byte, path string, args []string) (string, error) {
	budget := DefaultCommandBudget
	if dl, ok := ctx.Deadline(); ok {
		budget = time.Until(dl)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
	}
	start := time.Now()
	q, err := dialQGA(ctx, sock)
	if err != nil {
		return "", err
	}
	defer q.Close()
	var started struct {
		PID int `json:"pid"`
	}
	req := map[string]interface{}{"path": path, "arg": args, "capture-output": true}
	if stdin != nil {
		req["input-data"] = base64.StdEncoding.EncodeToString(stdin)
	}
	if err := q.call("guest-exec", req, into(&started)); err != nil {
		return "", err
	}
	poll := 200 * time.Millisecond
	for {
		var st struct {
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			OutData  string `json:"out-data"`
			ErrData  string `json:"err-data"`
		}
		if err := q.call("guest-exec-status", map[string]int{"pid": started.PID}, into(&st)); err != nil {
			// The request's deadline may be the budget's own and run out a moment before ctx says so.
			if dl, _ := ctx.Deadline(); ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(dl) {
				return "", stillRunning(path, args, started.PID, time.Since(start), budget)
			}
			return "", fmt.Errorf("%s %v (guest pid %d, may still be running there): %w", path, args, started.PID, err)
		}
		if st.Exited {
			out, _ := base64.StdEncoding.DecodeString(st.OutData)
			errOut, _ := base64.StdEncoding.DecodeString(st.ErrData)
			if st.ExitCode != 0 {
				return string(out), fmt.Errorf("%s %v exited %d: %s%s", path, args, st.ExitCode, out, errOut)
			}
			return string(out), nil
		}
		select {
		case <-ctx.Done():
			return "", stillRunning(path, args, started.PID, time.Since(start), budget)
		case <-time.After(poll):
		}
		if poll < time.Second { // a long command is polled less often
			poll += 100 * time.Millisecond
		}
	}
}

func stillRunning(path string, args []string, pid int, ran, budget time.Duration) error {
	return fmt.Errorf("%s %v: %w (pid %d) after %s, its budget %s: the guest agent answered, the command did not exit; it goes on in the guest",
		path, args, ErrStillRunning, pid, ran.Round(time.Second), budget.Round(time.Second))
}
