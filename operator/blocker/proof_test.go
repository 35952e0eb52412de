package blocker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheckSelector(t *testing.T) {
	for _, ok := range []string{`cluster="staging"`, `cluster="staging",region="eu"`, ` cluster = "a,b" , job="slipway"`, `name="quote \" inside"`} {
		if err := CheckSelector(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{``, `staging`, `cluster=staging`, `cluster="staging"}`, `version="1"`, `__name__="x"`, `result="x"`, `cluster="a" or vector(1)`,
		`env=~"stg.*"`, `region!="eu"`, `job!~"x|y"`, `cluster="a",`} {
		if err := CheckSelector(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Known answers of the proof rule: every matching source must have proved the version (the least
// proven decides), fail closed on none.
func TestJudgeProof(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	rule := ProofRule{Selector: `cluster="staging"`, MinCycles: 2, Soak: 72 * time.Hour}
	proven := func(ago time.Duration, finished float64) ProofSeries {
		return ProofSeries{Labels: `{cluster="staging"}`, Finished: finished, HasFinished: true, ProvenSince: now.Add(-ago)}
	}
	for _, c := range []struct {
		name   string
		series []ProofSeries
		ok     bool
		why    string
		retry  time.Duration
	}{
		{"nothing there", nil, false, "has no proof of it", 0},
		{"soaked", []ProofSeries{proven(80*time.Hour, 3)}, true, "", 0},
		{"soaking", []ProofSeries{proven(20*time.Hour, 3)}, false, `4459.2.1: {cluster="staging"} proved it 20h0m0s ago, soak 72h0m0s (until 2026-11-29T16:00:00Z)`, 52*time.Hour + 10*time.Millisecond},
		{"too few cycles", []ProofSeries{proven(80*time.Hour, 1)}, false, "finished 1 of the 2 cycles required", 0},
		{"halted there", []ProofSeries{{Labels: "x", Finished: 5, HasFinished: true, Halted: true, ProvenSince: now.Add(-100 * time.Hour)}}, false, "halted at x", 0},
		{"not proven", []ProofSeries{{Labels: "x", Finished: 5, HasFinished: true}}, false, "not proven at x yet", 0},
		{"no cycles series", []ProofSeries{{Labels: "x", ProvenSince: now.Add(-100 * time.Hour)}}, false, "finished 0 of the 2", 0},
		{"two sources, the later decides", []ProofSeries{proven(100*time.Hour, 3), proven(10*time.Hour, 3)}, false, "proved it 10h0m0s ago", 62*time.Hour + 10*time.Millisecond},
	} {
		ok, why, retry := JudgeProof(c.series, rule, "4459.2.1", now)
		if ok != c.ok || !strings.Contains(why, c.why) || retry != c.retry {
			t.Errorf("%s: %v %q %s; want %v %q %s", c.name, ok, why, retry, c.ok, c.why, c.retry)
		}
	}
}

// What a query endpoint answers, read as the gate reads it: series grouped by their labels, and every
// answer that is no proof (warnings of a partial answer, NaN, a time that is not one, no vector) an
// error, so the gate holds.
func TestProofSourceAnswers(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var answer string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || !strings.Contains(r.FormValue("query"), `version="4459.2.1",cluster="staging"`) {
			http.Error(w, "unexpected "+r.URL.String()+" "+r.FormValue("query"), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer srv.Close()
	tick := now
	clock := func() time.Time { tick = tick.Add(time.Millisecond); return tick } // every answer outlives its TTL
	src, err := NewProofSource(ProofSourceConfig{URL: srv.URL, TTL: time.Nanosecond, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	sample := func(name, extra, value string) string {
		return fmt.Sprintf(`{"metric":{"__name__":%q,"cluster":"staging","version":"4459.2.1"%s},"value":[%d,%q]}`, name, extra, now.Unix(), value)
	}
	vector := func(samples ...string) string {
		return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}}`
	}
	proven := now.Add(-time.Hour).Unix()
	answer = vector(sample("slipway_version_cycles", `,"result":"finished"`, "3"), sample("slipway_version_cycles", `,"result":"failed"`, "0"),
		sample("slipway_version_halted", "", "0"), sample("slipway_version_proven_since_seconds", "", fmt.Sprint(proven)))
	series, err := src.Series(context.Background(), "4459.2.1", `cluster="staging"`)
	if err != nil || len(series) != 1 || series[0].Finished != 3 || !series[0].HasFinished || series[0].Halted || series[0].ProvenSince.Unix() != proven {
		t.Fatalf("series %+v, %v", series, err)
	}
	for name, bad := range map[string]string{
		"warnings":     `{"status":"success","warnings":["store eu-1 unreachable"],"data":{"resultType":"vector","result":[]}}`,
		"NaN":          vector(sample("slipway_version_cycles", `,"result":"finished"`, "NaN")),
		"time zero":    vector(sample("slipway_version_proven_since_seconds", "", "0")),
		"time to come": vector(sample("slipway_version_proven_since_seconds", "", fmt.Sprint(now.Add(time.Hour).Unix()))),
		"not a vector": `{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`,
		"error":        `{"status":"error","errorType":"bad_data","error":"parse error"}`,
		"not json":     `<html>login</html>`,
	} {
		answer = bad
		if s, err := src.Series(context.Background(), "4459.2.1", `cluster="staging"`); err == nil {
			t.Errorf("%s: no error, series %+v", name, s)
		}
	}
}
