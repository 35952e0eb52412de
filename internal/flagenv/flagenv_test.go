package flagenv

import (
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	a := fs.String("reboot-window-start", "", "")
	b := fs.Duration("drain-timeout", time.Minute, "")
	c := fs.String("given", "", "")
	if err := fs.Parse([]string{"--given=cli"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("P_REBOOT_WINDOW_START", "Mon 14:00")
	t.Setenv("P_GIVEN", "env")
	if err := Set(fs, "P"); err != nil {
		t.Fatal(err)
	}
	if *a != "Mon 14:00" || *b != time.Minute || *c != "cli" {
		t.Errorf("got %q %s %q: env fills unset flags only", *a, *b, *c)
	}
	t.Setenv("P_DRAIN_TIMEOUT", "soon")
	if err := Set(fs, "P"); err == nil {
		t.Error("a bad environment value must be an error")
	}
}

func TestUndocumented(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("documented", false, "")
	fs.Bool("secret", false, "")
	fs.Int("v", 0, "")
	if got := Undocumented(fs, "| `--documented` | `-v` |"); !reflect.DeepEqual(got, []string{"`--secret`"}) {
		t.Errorf("Undocumented = %v", got)
	}
}

// A variable set for a flag the command line gives too is named, with the value that won: the
// README's `kubectl set env` over a Deployment passing --max-unavailable=1 must not go unnoticed.
func TestShadowed(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("max-unavailable", "1", "")
	fs.String("reboot-window", "", "")
	t.Setenv("X_MAX_UNAVAILABLE", "10%")
	t.Setenv("X_REBOOT_WINDOW", "Mon-Fri 22:00-05:00")
	args := []string{"--max-unavailable=1"}
	if err := Parse(fs, args, "X"); err != nil {
		t.Fatal(err)
	}
	got := Shadowed(fs, args, "X")
	want := `X_MAX_UNAVAILABLE="10%" is not used: --max-unavailable=1 on the command line wins`
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("Shadowed = %q, want one line beginning %q", got, want)
	}
	if v := fs.Lookup("reboot-window").Value.String(); v != "Mon-Fri 22:00-05:00" {
		t.Errorf("reboot-window from its variable: %q", v)
	}
}
