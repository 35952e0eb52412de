package harness

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// guestExec speaks the qemu-guest-agent protocol (JSON over the virtio-serial socket): guest-exec,
// then guest-exec-status until the process exited. No SSH, no network needed.
func guestExec(ctx context.Context, sock string, stdin []byte, path string, args []string) (string, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return "", fmt.Errorf("guest agent socket: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	}
	r := bufio.NewReader(conn)
	call := func(cmd string, arguments interface{}, out interface{}) error {
		req := map[string]interface{}{"execute": cmd}
		if arguments != nil {
			req["arguments"] = arguments
		}
		b, _ := json.Marshal(req)
		if _, err := conn.Write(append(b, '\n')); err != nil {
			return err
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return err
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
				return fmt.Errorf("%s: %s", cmd, resp.Error.Desc)
			}
			if resp.Return != nil {
				return json.Unmarshal(resp.Return, out)
			}
		}
	}
	// Flush anything a previous client left half-read.
	var sync int64
	if err := call("guest-sync", map[string]int64{"id": 4242}, &sync); err != nil {
		return "", err
	}
	var started struct {
		PID int `json:"pid"`
	}
	req := map[string]interface{}{"path": path, "arg": args, "capture-output": true}
	if stdin != nil {
		req["input-data"] = base64.StdEncoding.EncodeToString(stdin)
	}
	if err := call("guest-exec", req, &started); err != nil {
		return "", err
	}
	for {
		var st struct {
			Exited   bool   `json:"exited"`
			ExitCode int    `json:"exitcode"`
			OutData  string `json:"out-data"`
			ErrData  string `json:"err-data"`
		}
		if err := call("guest-exec-status", map[string]int{"pid": started.PID}, &st); err != nil {
			return "", err
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
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
