// Package redact keeps credentials in URLs out of everything Slipway repeats: logs, Events, the
// blocked-by annotation every agent can read, the published fleet status and notifications. A URL
// given on the command line (--prometheus-url, --notify-url) may carry a password in its user info or
// a token in its query; only its owner's eyes should see them.
package redact

import (
	"net/url"
	"slices"
	"sort"
	"strings"
)

// Mask replaces a secret.
const Mask = "***"

// URL is u without its secrets: the user info and every query value masked, scheme, host, path and
// query keys kept (they say where, not how to get in), e.g. https://***@prom.example:9090/prom?token=***.
func URL(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User(Mask)
	}
	if c.RawQuery != "" {
		q := c.Query()
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, url.QueryEscape(k)+"="+Mask)
		}
		c.RawQuery = strings.Join(parts, "&")
	}
	c.Fragment, c.RawFragment = "", ""
	s := c.String()
	// url.String escapes the mask in user info; say it plainly.
	return strings.Replace(s, url.PathEscape(Mask)+"@", Mask+"@", 1)
}

// Secrets lists the parts of u that may be secrets (user name and password, query values of at
// least minValue bytes, and path segments of at least minSegment bytes; 0: no path segment), longest
// first, for Scrub. The minimums keep words that are no secret (a template name) readable in errors.
func Secrets(u *url.URL, minSegment, minValue int) []string {
	var out []string
	add := func(s string, min int) {
		if len(s) >= min {
			out = append(out, s)
		}
	}
	if u.User != nil {
		add(u.User.String(), 3)
		add(u.User.Username(), 3)
		if p, ok := u.User.Password(); ok {
			add(p, 3)
		}
	}
	if minSegment > 0 {
		for _, seg := range strings.Split(u.Path+"/"+u.Opaque, "/") {
			add(seg, minSegment)
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			add(v, max(minValue, 1))
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// Scrub masks every secret in s, raw and escaped as a query or a path would escape it: error
// messages from HTTP clients repeat the URL they requested.
func Scrub(s string, secrets []string) string {
	for _, x := range secrets {
		s = strings.ReplaceAll(s, x, Mask)
		if e := url.QueryEscape(x); e != x {
			s = strings.ReplaceAll(s, e, Mask)
		}
		if e := url.PathEscape(x); e != x {
			s = strings.ReplaceAll(s, e, Mask)
		}
	}
	return s
}
