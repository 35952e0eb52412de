package redact

import (
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://prometheus-k8s.monitoring:9090":                     "http://prometheus-k8s.monitoring:9090",
		"https://alice:s3cr3t@prom.example/prefix":                  "https://***@prom.example/prefix",
		"https://token-only@prom.example":                           "https://***@prom.example",
		"https://prom.example/api?access_token=abc123&org=7":        "https://prom.example/api?access_token=***&org=***",
		"https://u:p@thanos.example:10902/q?x=1&x=2&key=a%20b#frag": "https://***@thanos.example:10902/q?key=***&x=***",
		"http://prom.example/?=bare":                                "http://prom.example/?=***",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := URL(u); got != want {
			t.Errorf("URL(%s) = %s, want %s", in, got, want)
		}
	}
}

// An HTTP client's error repeats the URL it asked for; Scrub leaves nothing of the secrets in it,
// raw or escaped.
func TestScrub(t *testing.T) {
	u, _ := url.Parse("https://alice:p%40ss%2Fw0rd@prom.example/webhook/0123456789abcdef?token=tok+en%2Fx&n=1")
	msg := `Get "https://alice:p%40ss%2Fw0rd@prom.example/webhook/0123456789abcdef/api/v1/alerts?token=tok+en%2Fx&n=1": dial tcp: refused; user alice password p@ss/w0rd token tok en/x`
	got := Scrub(msg, Secrets(u, 8, 3))
	for _, leak := range []string{"p%40ss%2Fw0rd", "p@ss/w0rd", "tok+en%2Fx", "tok en/x", "0123456789abcdef", "alice"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q left in %s", leak, got)
		}
	}
	if !strings.Contains(got, "prom.example") || !strings.Contains(got, "dial tcp: refused") {
		t.Errorf("scrubbed more than the secrets: %s", got)
	}
	// Path segments are kept unless asked for (a Prometheus path prefix is no secret).
	if got := Scrub("/webhook/0123456789abcdef", Secrets(u, 0, 3)); !strings.Contains(got, "0123456789abcdef") {
		t.Errorf("path segment scrubbed with minSegment 0: %s", got)
	}
}
