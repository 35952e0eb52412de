package fleetlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Backend is what the HTTP side needs from the cluster. PreReboot reports whether the node may
// reboot now (asking for it if it has not yet); SteadyState says the node is up and not rebooting.
// Both must be idempotent: Zincati retries and keeps no state.
type Backend interface {
	PreReboot(ctx context.Context, id, group string) (granted bool, err error)
	SteadyState(ctx context.Context, id, group string) error
}

// Error is a FleetLock error reply: {"kind": ..., "value": ...} with an HTTP status.
type Error struct {
	Status int
	Kind   string
	Value  string
}

func (e *Error) Error() string { return e.Kind + ": " + e.Value }

// The kinds this server replies with.
const (
	KindBadRequest   = "bad_request"    // not a FleetLock request
	KindUnknownNode  = "unknown_node"   // no Node has a machine ID giving this id
	KindAgentNode    = "agent_node"     // the Node runs Slipway's agent: it must not also use FleetLock
	KindNotEnrolled  = "not_enrolled"   // the Node lacks the update.slipway.dev/fleetlock=true label
	KindWaiting      = "reboot_pending" // asked; the operator has not granted it yet (budget, window, hooks, drain)
	KindInternal     = "internal_error" // the API server failed us; retry
	KindOK           = "ok"             // the body of a 200
	KindPaused       = "fleet_paused"   // asked; the fleet (or the node's group) is paused (ConfigMap slipway-fleet)
	KindGroupChanged = "group_changed"  // asked in another group than the one the node's pending ask or cycle is in
	KindNotThisNode  = "not_this_node"  // a per-node server asked for another node's id
)

var (
	idPattern = regexp.MustCompile(`^[0-9a-fA-F-]{32,36}$`)
	// groupPattern is the protocol's own definition of a group, exactly: dots and dashes anywhere, no
	// underscore. The protocol sets no length; Slipway keeps a group to a label value's 63 characters
	// (MaxGroup), since every group is a key in the operator's counts and a name in its metrics.
	groupPattern = regexp.MustCompile(`^[a-zA-Z0-9.-]+$`)
)

// RequestTimeout bounds the cluster work of one FleetLock request (a variable for tests).
var RequestTimeout = 15 * time.Second

// MaxGroup is the longest group this server accepts (a Kubernetes label value's limit).
const MaxGroup = 63

type request struct {
	ClientParams struct {
		ID    string `json:"id"`
		Group string `json:"group"`
	} `json:"client_params"`
}

// Handler serves POST /v1/pre-reboot and /v1/steady-state.
func Handler(b Backend, log klog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/pre-reboot", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, log, "pre-reboot", func(ctx context.Context, id, group string) error {
			granted, err := b.PreReboot(ctx, id, group)
			if err == nil && !granted {
				err = &Error{Status: http.StatusConflict, Kind: KindWaiting, Value: "reboot requested; waiting for the update-operator to grant it (budget, window, hooks, drain)"}
			}
			return err
		})
	})
	mux.HandleFunc("/v1/steady-state", func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, log, "steady-state", b.SteadyState)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// The kubelet's probe of a hostNetwork pod on loopback: the server answers.
		reply(w, &Error{Status: http.StatusOK, Kind: KindOK, Value: "serving"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		reply(w, &Error{Status: http.StatusNotFound, Kind: KindBadRequest, Value: "FleetLock serves POST /v1/pre-reboot and /v1/steady-state"})
	})
	return mux
}

func serve(w http.ResponseWriter, r *http.Request, log klog.Logger, op string, do func(context.Context, string, string) error) {
	id, group, err := parse(r)
	if err == nil {
		// Bounded: Zincati retries, and a request held by a slow API server must not hold a
		// connection (and a goroutine) for ever.
		ctx, cancel := context.WithTimeout(r.Context(), RequestTimeout)
		err = do(ctx, id, group)
		cancel()
	}
	var fe *Error
	switch {
	case err == nil:
		log.V(1).Info("FleetLock", "op", op, "id", id, "group", group, "result", "ok")
		// The protocol only asks for 200. A body in the error replies' shape costs nothing and suits
		// clients that decode every reply.
		reply(w, &Error{Status: http.StatusOK, Kind: KindOK, Value: op + ": ok"})
		return
	case !errors.As(err, &fe):
		log.Error(err, "FleetLock request failed", "op", op, "id", id)
		fe = &Error{Status: http.StatusInternalServerError, Kind: KindInternal, Value: err.Error()}
	default:
		log.V(1).Info("FleetLock", "op", op, "id", id, "group", group, "result", fe.Kind)
	}
	reply(w, fe)
}

func reply(w http.ResponseWriter, e *Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"kind": e.Kind, "value": e.Value})
}

// parse checks a request the way the protocol defines it; anything else is a bad request that
// changes nothing.
func parse(r *http.Request) (id, group string, err error) {
	bad := func(format string, args ...interface{}) error {
		return &Error{Status: http.StatusBadRequest, Kind: KindBadRequest, Value: fmt.Sprintf(format, args...)}
	}
	if r.Method != http.MethodPost {
		return "", "", &Error{Status: http.StatusMethodNotAllowed, Kind: KindBadRequest, Value: "use POST"}
	}
	if !strings.EqualFold(r.Header.Get("fleet-lock-protocol"), "true") {
		return "", "", bad("missing header fleet-lock-protocol: true")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10+1))
	if err != nil {
		return "", "", bad("reading body: %v", err)
	}
	if len(body) > 64<<10 {
		return "", "", bad("body larger than 64 KiB")
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return "", "", bad("body is not FleetLock JSON: %v", err)
	}
	id, group = req.ClientParams.ID, req.ClientParams.Group
	if !idPattern.MatchString(id) {
		return "", "", bad("client_params.id %q is not a 128-bit hex node id", id)
	}
	if len(group) > MaxGroup {
		return "", "", bad("client_params.group is %d characters long; Slipway accepts groups of at most %d (a label value)", len(group), MaxGroup)
	}
	if !groupPattern.MatchString(group) {
		return "", "", bad("client_params.group %q does not match the protocol's ^[a-zA-Z0-9.-]+$", group)
	}
	return normalize(id), group, nil
}
