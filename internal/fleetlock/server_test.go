package fleetlock

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

type fakeBackend struct {
	calls   []string
	granted bool
	err     error
}

func (f *fakeBackend) PreReboot(_ context.Context, id, group string) (bool, error) {
	f.calls = append(f.calls, "pre-reboot "+id+" "+group)
	return f.granted, f.err
}

func (f *fakeBackend) SteadyState(_ context.Context, id, group string) error {
	f.calls = append(f.calls, "steady-state "+id+" "+group)
	return f.err
}

const zincatiBody = `{"client_params":{"id":"975228d4-6dc9-4622-b9bb-e16671e2b58d","group":"default"}}`

func do(t *testing.T, h http.Handler, method, path, body string, header bool) (int, map[string]string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if header {
		req.Header.Set("fleet-lock-protocol", "true")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var reply map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &reply); err != nil {
		t.Fatalf("reply (%d) is not FleetLock JSON: %q", rec.Code, rec.Body.String())
	}
	return rec.Code, reply
}

// Known answers: what the server replies to each request and what it asks the backend.
func TestHandler(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		header                   bool
		backend                  fakeBackend
		status                   int
		kind                     string
		call                     string
	}{
		{"pre-reboot granted", "POST", "/v1/pre-reboot", zincatiBody, true, fakeBackend{granted: true}, 200, KindOK, "pre-reboot 975228d46dc94622b9bbe16671e2b58d default"},
		{"pre-reboot waiting", "POST", "/v1/pre-reboot", zincatiBody, true, fakeBackend{}, 409, KindWaiting, "pre-reboot 975228d46dc94622b9bbe16671e2b58d default"},
		{"steady-state", "POST", "/v1/steady-state", zincatiBody, true, fakeBackend{}, 200, KindOK, "steady-state 975228d46dc94622b9bbe16671e2b58d default"},
		{"backend says unknown node", "POST", "/v1/steady-state", zincatiBody, true, fakeBackend{err: &Error{Status: 404, Kind: KindUnknownNode, Value: "x"}}, 404, KindUnknownNode, "steady-state 975228d46dc94622b9bbe16671e2b58d default"},
		{"backend fails", "POST", "/v1/pre-reboot", zincatiBody, true, fakeBackend{err: errors.New("apiserver down")}, 500, KindInternal, "pre-reboot 975228d46dc94622b9bbe16671e2b58d default"},
		{"GET", "GET", "/v1/pre-reboot", "", true, fakeBackend{}, 405, KindBadRequest, ""},
		{"no protocol header", "POST", "/v1/pre-reboot", zincatiBody, false, fakeBackend{}, 400, KindBadRequest, ""},
		{"not JSON", "POST", "/v1/pre-reboot", "id=1", true, fakeBackend{}, 400, KindBadRequest, ""},
		{"no id", "POST", "/v1/pre-reboot", `{"client_params":{"group":"default"}}`, true, fakeBackend{}, 400, KindBadRequest, ""},
		{"id not hex", "POST", "/v1/pre-reboot", `{"client_params":{"id":"../../etc/passwd-and-more-chars-here","group":"default"}}`, true, fakeBackend{}, 400, KindBadRequest, ""},
		{"no group", "POST", "/v1/steady-state", `{"client_params":{"id":"975228d46dc94622b9bbe16671e2b58d"}}`, true, fakeBackend{}, 400, KindBadRequest, ""},
		{"huge body", "POST", "/v1/steady-state", `{"client_params":{"id":"975228d46dc94622b9bbe16671e2b58d","group":"` + strings.Repeat("a", 70000) + `"}}`, true, fakeBackend{}, 400, KindBadRequest, ""},
		{"unknown path", "POST", "/v1/lock", zincatiBody, true, fakeBackend{}, 404, KindBadRequest, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.backend
			status, reply := do(t, Handler(&b, klog.Background()), c.method, c.path, c.body, c.header)
			if status != c.status || reply["kind"] != c.kind {
				t.Errorf("got %d %v, want %d %q", status, reply, c.status, c.kind)
			}
			if reply["value"] == "" {
				t.Error("reply without a value saying why")
			}
			want := []string{}
			if c.call != "" {
				want = []string{c.call}
			}
			if strings.Join(b.calls, ";") != strings.Join(want, ";") {
				t.Errorf("backend calls %q, want %q", b.calls, want)
			}
		})
	}
}

// The group is the protocol's ^[a-zA-Z0-9.-]+$: what it allows is accepted, whatever its first
// character, up to a label value's 63 characters; what it does not (underscore, empty, other
// characters) is refused, and so is a longer group (every group is a key in the operator's counts).
func TestGroupIsTheSpecsRegexp(t *testing.T) {
	body := func(group string) string {
		return `{"client_params":{"id":"975228d46dc94622b9bbe16671e2b58d","group":` + strconv.Quote(group) + `}}`
	}
	for _, g := range []string{"default", "workers", ".hidden", "-dash", "a.b-c", "...", "---", strings.Repeat("a", 63), strings.Repeat("Z9.-", 15), "0"} {
		b := fakeBackend{granted: true}
		if status, reply := do(t, Handler(&b, klog.Background()), "POST", "/v1/pre-reboot", body(g), true); status != 200 {
			t.Errorf("group %q (spec-valid) refused: %d %v", g, status, reply)
		}
	}
	for _, g := range []string{"", "a_b", "_", "a b", "a/b", "gr\u00fcn", "a\nb", "*", strings.Repeat("a", 64), strings.Repeat("Z9.-", 100)} {
		b := fakeBackend{granted: true}
		if status, _ := do(t, Handler(&b, klog.Background()), "POST", "/v1/pre-reboot", body(g), true); status != 400 || len(b.calls) != 0 {
			t.Errorf("group %q (not spec-valid) got %d, backend calls %v", g, status, b.calls)
		}
	}
}

// Requests exactly as real clients send them: Zincati (pretty-printed JSON, no Content-Type) and the
// protocol document's curl -d example (Content-Type application/x-www-form-urlencoded).
func TestRealClientRequests(t *testing.T) {
	zincati := "{\n  \"client_params\": {\n    \"group\": \"default\",\n    \"id\": \"c988d2509fdf4cdcbed39037c56406fb\"\n  }\n}"
	for name, contentType := range map[string]string{"Zincati": "", "curl -d": "application/x-www-form-urlencoded"} {
		b := fakeBackend{granted: true}
		req := httptest.NewRequest("POST", "/v1/pre-reboot", strings.NewReader(zincati))
		req.Header.Set("fleet-lock-protocol", "true")
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		rec := httptest.NewRecorder()
		Handler(&b, klog.Background()).ServeHTTP(rec, req)
		if rec.Code != 200 || strings.Join(b.calls, ";") != "pre-reboot c988d2509fdf4cdcbed39037c56406fb default" {
			t.Errorf("%s: %d %q, calls %v", name, rec.Code, rec.Body.String(), b.calls)
		}
		var reply map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &reply); err != nil || reply["kind"] != KindOK {
			t.Errorf("%s: 200 body %q is not {kind: ok}", name, rec.Body.String())
		}
	}
}

// hangingBackend never answers until the request's context ends.
type hangingBackend struct{}

func (hangingBackend) PreReboot(ctx context.Context, _, _ string) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}
func (hangingBackend) SteadyState(ctx context.Context, _, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

// A request whose cluster work never ends (a wedged API server) is answered with an error Zincati
// retries, after RequestTimeout, instead of holding its connection for ever.
func TestRequestsAreBounded(t *testing.T) {
	defer func(d time.Duration) { RequestTimeout = d }(RequestTimeout)
	RequestTimeout = 200 * time.Millisecond
	for _, op := range []string{"/v1/pre-reboot", "/v1/steady-state"} {
		done := make(chan int, 1)
		go func() {
			status, _ := do(t, Handler(hangingBackend{}, klog.Background()), "POST", op, zincatiBody, true)
			done <- status
		}()
		select {
		case status := <-done:
			if status != http.StatusInternalServerError {
				t.Errorf("%s: %d, want 500 (retry)", op, status)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s never answered", op)
		}
	}
}
