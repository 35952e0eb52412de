package flagenv

import (
	"flag"
	"reflect"
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
