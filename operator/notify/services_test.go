package notify

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/nicholas-fedor/shoutrrr/pkg/router"
	"github.com/nicholas-fedor/shoutrrr/pkg/services/specialized/generic"
	"github.com/nicholas-fedor/shoutrrr/pkg/types"
	"k8s.io/klog/v2"
)

// wire is one request as a webhook receives it.
type wire struct {
	Method, Path, Query, ContentType, Accept string
	Headers                                  map[string]string // the X-* and Authorization headers
	Body                                     any               // JSON decoded, or the text
}

func capture(t *testing.T, send func(u string) error, rawURL func(host string) string) wire {
	t.Helper()
	got := make(chan wire, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w := wire{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"), Accept: r.Header.Get("Accept"), Headers: map[string]string{}}
		for k, v := range r.Header {
			if strings.HasPrefix(k, "X-") || k == "Authorization" {
				w.Headers[k] = strings.Join(v, ",")
			}
		}
		var j any
		if json.Unmarshal(b, &j) == nil {
			w.Body = j
		} else {
			w.Body = string(b)
		}
		got <- w
		rw.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	if err := send(rawURL(srv.Listener.Addr().String())); err != nil {
		t.Fatalf("send: %v", err)
	}
	return <-got
}

// generic:// is sent exactly as shoutrrr's generic service sends it (its method, URL, headers and
// body), for the URLs kured users write: shoutrrr's service, in this test only, is the reference.
func TestGenericSendsAsShoutrrrDoes(t *testing.T) {
	for _, c := range []string{
		"generic://%s/hook?disabletls=yes",
		"generic://%s/hook?disabletls=yes&template=json",
		"generic://%s/hook?disabletls=yes&template=JSON&messagekey=text&titlekey=subject",
		"generic://%s/a/b?disabletls=yes&template=json&$team=ops&$env=prod&@Authorization=Bearer%%20t0ken&@XApiKey=k&@x-custom=c",
		"generic://%s/hook?disabletls=yes&method=PUT&contenttype=application/vnd.x%%2Bjson&template=json",
		"generic://%s/hook?disabletls=yes&keep=this&and=that",
		"generic+http://%s/custom/path?keep=1",
		"generic+http://%s/custom?template=json&$x=1",
	} {
		raw := func(host string) string { return strings.Replace(c, "%s", host, 1) }
		ours := capture(t, func(u string) error {
			tgt, err := newTarget(u, 1, DefaultSendTimeout, klog.Background())
			if err != nil {
				return err
			}
			return tgt.svc.Send("node a: reboot done", &types.Params{})
		}, raw)
		theirs := capture(t, func(u string) error {
			pu, err := url.Parse(u)
			if err != nil {
				return err
			}
			svc := &generic.Service{}
			if strings.HasPrefix(pu.Scheme, "generic+") {
				if pu, err = svc.GetConfigURLFromCustom(pu); err != nil {
					return err
				}
			}
			if err := svc.Initialize(pu, nil); err != nil {
				return err
			}
			return svc.Send("node a: reboot done", &types.Params{})
		}, raw)
		if !reflect.DeepEqual(ours, theirs) {
			t.Errorf("%s:\n ours   %+v\n theirs %+v", c, ours, theirs)
		}
	}
}

// The service table is shoutrrr's router's: every scheme is served, by shoutrrr's own service or
// (generic, logger, smtp) by one sent as shoutrrr sends it.
func TestServicesAreShoutrrrs(t *testing.T) {
	var r router.ServiceRouter
	for _, s := range r.ListServices() {
		if _, served := services[s]; !served {
			t.Errorf("shoutrrr's %q is not served", s)
		}
	}
	if len(services) != len(r.ListServices()) {
		t.Errorf("%d served, shoutrrr has %d", len(services), len(r.ListServices()))
	}
}

type lines []string

func (l *lines) Print(v ...any)                 { *l = append(*l, fmt.Sprint(v...)) }
func (l *lines) Printf(format string, v ...any) { *l = append(*l, fmt.Sprintf(format, v...)) }
func (l *lines) Println(v ...any)               { *l = append(*l, strings.TrimSuffix(fmt.Sprintln(v...), "\n")) }

// logger:// writes each message, as it is, as one line of the operator's log.
func TestLoggerWritesTheMessage(t *testing.T) {
	var got lines
	svc := services["logger"]()
	if err := svc.Initialize(&url.URL{Scheme: "logger"}, &got); err != nil {
		t.Fatal(err)
	}
	if err := svc.Send("node a: cycle finished <b>", nil); err != nil {
		t.Fatal(err)
	}
	if want := (lines{"node a: cycle finished <b>"}); !reflect.DeepEqual(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
}
