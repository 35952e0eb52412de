package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/discord"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/googlechat"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/lark"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/matrix"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/mattermost"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/rocketchat"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/signal"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/slack"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/teams"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/telegram"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/wecom"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/chat/zulip"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/incident/opsgenie"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/incident/pagerduty"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/push/bark"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/push/gotify"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/push/ifttt"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/push/join"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/push/ntfy"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/push/pushbullet"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/push/pushover"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/specialized/generic"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/specialized/notifiarr"
	"github.com/nicholas-fedor/shoutrrr/pkg/types"
)

// service is what a target needs of a notification service: shoutrrr's services have it, and so do
// the two below that stand in for shoutrrr's own.
type service interface {
	Initialize(u *url.URL, log types.StdLogger) error
	Send(message string, params *types.Params) error
}

// services are the notification services by URL scheme: shoutrrr's router's table, three of them
// sent here.
//
// Why not shoutrrr's router: it links all of its services, and three of them (smtp, generic, logger)
// send through text/template. Executing a template looks methods up by name at run time, so the Go
// linker must then keep every exported method of every type the operator can put in an interface:
// with them the update-operator is an 88 MB binary that maps 41.7 MiB of itself at 5,000 nodes,
// without them 55 MB and 29.5 MiB (docs/performance.md). generic:// and logger:// are sent here as
// shoutrrr sends them, and smtp:// with Go's net/smtp (email.go), each from shoutrrr's own URL parsing
// (genericHook, logLine, email). TestNoReflectiveTemplates (operator/cmd/update-operator) fails if a dependency
// brings text/template's execution back.
var services = map[string]func() service{
	"bark":       func() service { return &bark.Service{} },
	"discord":    func() service { return &discord.Service{} },
	"generic":    func() service { return &genericHook{} },
	"googlechat": func() service { return &googlechat.Service{} },
	"gotify":     func() service { return &gotify.Service{} },
	"hangouts":   func() service { return &googlechat.Service{} },
	"ifttt":      func() service { return &ifttt.Service{} },
	"join":       func() service { return &join.Service{} },
	"lark":       func() service { return &lark.Service{} },
	"logger":     func() service { return &logLine{} },
	"matrix":     func() service { return &matrix.Service{} },
	"mattermost": func() service { return &mattermost.Service{} },
	"notifiarr":  func() service { return &notifiarr.Service{} },
	"ntfy":       func() service { return &ntfy.Service{} },
	"opsgenie":   func() service { return &opsgenie.Service{} },
	"pagerduty":  func() service { return &pagerduty.Service{} },
	"pushbullet": func() service { return &pushbullet.Service{} },
	"pushover":   func() service { return &pushover.Service{} },
	"rocketchat": func() service { return &rocketchat.Service{} },
	"signal":     func() service { return &signal.Service{} },
	"smtp":       func() service { return &email{} },
	"slack":      func() service { return &slack.Service{} },
	"teams":      func() service { return &teams.Service{} },
	"telegram":   func() service { return &telegram.Service{} },
	"wecom":      func() service { return &wecom.Service{} },
	"zulip":      func() service { return &zulip.Service{} },
}

// knownServices lists the schemes, sorted, for error messages.
func knownServices() []string {
	var known []string
	for s := range services {
		known = append(known, s)
	}
	slices.Sort(known)
	return known
}

// customURL is a service with a <scheme>+<transport>:// form (generic+https://host/path).
type customURL interface {
	GetConfigURLFromCustom(u *url.URL) (*url.URL, error)
}

// genericHook is generic://, sent as shoutrrr's generic service sends it: the URL is parsed by
// shoutrrr's generic.Config (its properties, defaults and errors), the request is the same method,
// URL, headers and body (TestGenericSendsAsShoutrrrDoes compares the two on the wire). Only the
// payload templates differ: the plain message and template=json, never a named text/template (newTarget
// refuses those).
type genericHook struct {
	cfg     *generic.Config
	headers map[string]string // @Name=value query parameters
	extra   map[string]string // $key=value query parameters, added to a JSON payload
	log     types.StdLogger
	timeout time.Duration // of the whole request, the response's body included (0: none, as shoutrrr)
}

func (w *genericHook) Initialize(u *url.URL, log types.StdLogger) error {
	cfg, _ := generic.DefaultConfig()
	if err := cfg.SetURL(u); err != nil {
		return err
	}
	w.cfg, w.log = cfg, log
	w.headers, w.extra = map[string]string{}, map[string]string{}
	for key, values := range u.Query() {
		if len(key) < 2 || len(values) == 0 {
			continue
		}
		switch key[0] {
		case '@':
			w.headers[headerName(key[1:])] = values[0]
		case '$':
			w.extra[key[1:]] = values[0]
		}
	}
	return nil
}

// GetConfigURLFromCustom turns generic+https://host/path into the generic:// URL, by shoutrrr's rules.
func (w *genericHook) GetConfigURLFromCustom(u *url.URL) (*url.URL, error) {
	return (&generic.Service{}).GetConfigURLFromCustom(u)
}

// headerName spells a header parameter as shoutrrr does: a capital letter starts a new dash-separated
// word (@XApiKey is X-Api-Key); http.Header then gives each word its canonical case.
func headerName(key string) string {
	var b strings.Builder
	for i, r := range key {
		if r >= 'A' && r <= 'Z' && i > 0 && key[i-1] != '-' {
			b.WriteByte('-')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (w *genericHook) Send(message string, _ *types.Params) error {
	cfg := w.cfg
	var body []byte
	contentType := cfg.ContentType
	switch cfg.Template {
	case "":
		body, contentType = []byte(message), "text/plain"
	default: // json, in any case: newTarget refuses the rest
		payload := map[string]string{}
		for k, v := range w.extra {
			payload[k] = v
		}
		payload[cfg.MessageKey] = message
		var err error
		if body, err = json.Marshal(payload); err != nil {
			return fmt.Errorf("marshaling params to JSON: %w", err)
		}
	}
	// The client's timeout (the sender's) bounds the whole request, the response's body included.
	req, err := http.NewRequestWithContext(context.Background(), cfg.RequestMethod, cfg.WebhookURL().String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("creating HTTP request: %w", err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", contentType)
	for k, v := range w.headers {
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Timeout: w.timeout}).Do(req)
	if err != nil {
		return fmt.Errorf("failed to send notification to generic webhook: sending HTTP request: %w", err)
	}
	defer res.Body.Close()
	if b, err := io.ReadAll(io.LimitReader(res.Body, 64<<10)); err == nil && w.log != nil {
		w.log.Print("Server response: ", string(b))
	}
	if res.StatusCode >= http.StatusBadRequest {
		return fmt.Errorf("failed to send notification to generic webhook: server returned unexpected response status code: %s", res.Status)
	}
	return nil
}

// logLine is logger://: each message is a line in the operator's log, as shoutrrr's logger service
// writes it.
type logLine struct{ log types.StdLogger }

func (l *logLine) Initialize(_ *url.URL, log types.StdLogger) error {
	l.log = log
	return nil
}

func (l *logLine) Send(message string, _ *types.Params) error {
	l.log.Print(message)
	return nil
}
