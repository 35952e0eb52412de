package logformat

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// json: every line of klog's API and of its loggers is one JSON object, with klog's -v deciding
// which V(n) lines are written; text leaves klog as it is; anything else is refused.
func TestJSON(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	k := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(k)
	fs.Var(k.Lookup("v").Value, "v", "")
	if err := fs.Parse([]string{"-v=1"}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k.Set("v", "0") }()
	var out bytes.Buffer
	if err := Apply("json", fs, &out); err != nil {
		t.Fatal(err)
	}
	defer klog.ClearLogger()
	log := klog.Background().WithName("update-operator")
	log.Info("cycle step", "node", "worker-1", "action", "grant-reboot")
	log.V(1).Info("patched", "node", "worker-1")
	log.V(2).Info("waiting", "node", "worker-1") // above -v=1: not written
	log.Error(errors.New("boom"), "drain failed", "node", "worker-1")
	klog.Warning("flag -x is FLUO's")
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one JSON object per line: %q: %v", line, err)
		}
		got = append(got, m)
	}
	if len(got) != 4 {
		t.Fatalf("%d lines, want 4 (the V(2) line dropped at -v=1):\n%s", len(got), out.String())
	}
	for i, want := range []map[string]any{
		{"level": "INFO", "msg": "cycle step", "logger": "update-operator", "node": "worker-1", "action": "grant-reboot"},
		{"msg": "patched", "node": "worker-1"},
		{"level": "ERROR", "msg": "drain failed", "err": "boom"},
		{"msg": "flag -x is FLUO's"},
	} {
		for k, v := range want {
			if got[i][k] != v {
				t.Errorf("line %d: %s=%v, want %v (%v)", i+1, k, got[i][k], v, got[i])
			}
		}
		if _, ok := got[i]["time"]; !ok {
			t.Errorf("line %d has no time", i+1)
		}
	}
	for _, bad := range []string{"", "JSON", "logfmt"} {
		if err := Apply(bad, fs, &out); err == nil {
			t.Errorf("--log-format=%q accepted", bad)
		}
	}
}
