// Package flagenv fills flags from environment variables the way FLUO does (coreos/pkg/flagutil):
// flag "reboot-window-start" with prefix "UPDATE_OPERATOR" reads UPDATE_OPERATOR_REBOOT_WINDOW_START.
// Flags given on the command line win.
package flagenv

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// EnvName is the variable that can set flag name under prefix.
func EnvName(prefix, name string) string {
	return prefix + "_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Set applies the environment to every flag of fs not set on the command line. A value the flag
// rejects is an error naming the variable.
func Set(fs *flag.FlagSet, prefix string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		key := EnvName(prefix, f.Name)
		if v, ok := os.LookupEnv(key); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("environment variable %s=%q: %w", key, v, e)
			}
		}
	})
	return err
}

// Shadowed says, for each flag args give on the command line whose variable under prefix is set too,
// that the variable is not used: a `kubectl set env` over a Deployment that passes the flag changes
// nothing, and the binary says so at start rather than leaving the person to wonder. Call it after
// Parse.
func Shadowed(fs *flag.FlagSet, args []string, prefix string) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range Given(args) {
		name := a.Name
		f := fs.Lookup(name)
		if f == nil || seen[name] {
			continue
		}
		seen[name] = true
		key := EnvName(prefix, name)
		if v, ok := os.LookupEnv(key); ok {
			out = append(out, fmt.Sprintf("%s=%q is not used: --%s=%s on the command line wins (change or remove the argument to set it)", key, v, name, f.Value.String()))
		}
	}
	return out
}

// Arg is one flag as the command line gives it: its name (without dashes), and its value when it is
// written --name=value.
type Arg struct {
	Name, Value string
	HasValue    bool
}

// Given lists the flags of args, up to "--", in order (the values of "--name value" forms are not
// told from other arguments: only names are certain).
func Given(args []string) []Arg {
	var out []Arg
	for _, a := range args {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, has := strings.Cut(strings.TrimLeft(a, "-"), "=")
		out = append(out, Arg{name, value, has})
	}
	return out
}

// Parse parses args into fs, then fills what they left unset from the environment under prefix, and
// refuses stray arguments: the command line of each of Slipway's commands.
func Parse(fs *flag.FlagSet, args []string, prefix string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := Set(fs, prefix); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	return nil
}

// Undocumented lists the flags of fs that doc (the documentation) does not mention as `--name` (`-v` for v).
func Undocumented(fs *flag.FlagSet, doc string) []string {
	var missing []string
	fs.VisitAll(func(f *flag.Flag) {
		name := "`--" + f.Name + "`"
		if f.Name == "v" {
			name = "`-v`"
		}
		if !strings.Contains(doc, name) {
			missing = append(missing, name)
		}
	})
	return missing
}

// Reference renders fs as a Markdown table for docs/reference/: every flag with the environment
// variable that also sets it under prefix ("": none), its default and its --help text, in name order. The pages
// are generated from it (`make docs`) and each binary's test fails when its page differs
// (docs.CheckGenerated), so the reference cannot drift from --help.
func Reference(fs *flag.FlagSet, prefix string) string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def != "" {
			def = "`" + def + "`"
		}
		usage := strings.NewReplacer("|", "\\|", "\n", " ").Replace(f.Usage)
		env := "—"
		if prefix != "" {
			env = "`" + EnvName(prefix, f.Name) + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, env, def, usage)
	})
	return b.String()
}
