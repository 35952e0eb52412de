// Package butane turns Slipway's provisioning snippets into Ignition: Butane (flatcar and fcos
// variants, strict) with coreos/butane, Container Linux Configs with flatcar's ct, and validates the
// results with the Ignition parsers of the spec each Flatcar generation reads.
package butane

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	butane "github.com/coreos/butane/config"
	"github.com/coreos/butane/config/common"
	ct "github.com/flatcar/container-linux-config-transpiler/config"
)

// Snippets lists the sources in dir (*.bu and *.clc.yaml), sorted.
func Snippets(dir string) ([]string, error) {
	var out []string
	for _, pat := range []string{"*.bu", "*.clc.yaml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	sort.Strings(out)
	return out, nil
}

// Output is the Ignition file generated from a snippet, beside it: x.bu -> x.ign (spec 3.x),
// x.clc.yaml -> x.clc.ign (spec 2.3 for Flatcar < 3185).
func Output(src string) string {
	if strings.HasSuffix(src, ".clc.yaml") {
		return strings.TrimSuffix(src, ".yaml") + ".ign"
	}
	return strings.TrimSuffix(src, ".bu") + ".ign"
}

// Translate renders one snippet. Warnings are errors (strict), as `butane --strict` does.
func Translate(src string) ([]byte, error) {
	in, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	var out []byte
	switch {
	case strings.HasSuffix(src, ".bu"):
		b, r, err := butane.TranslateBytes(in, common.TranslateBytesOptions{Pretty: true})
		if err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", src, err, r)
		}
		if len(r.Entries) > 0 {
			return nil, fmt.Errorf("%s: strict: %s", src, r)
		}
		out = b
	case strings.HasSuffix(src, ".clc.yaml"):
		cfg, ast, r := ct.Parse(in)
		if r.IsFatal() || len(r.Entries) > 0 {
			return nil, fmt.Errorf("%s: %s", src, r)
		}
		ign, r := ct.Convert(cfg, "", ast)
		if r.IsFatal() || len(r.Entries) > 0 {
			return nil, fmt.Errorf("%s: %s", src, r)
		}
		b, err := json.MarshalIndent(ign, "", "  ")
		if err != nil {
			return nil, err
		}
		out = b
	default:
		return nil, fmt.Errorf("%s: not a .bu or .clc.yaml snippet", src)
	}
	if !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	return out, nil
}
