package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// ErrNoPrometheus is StartPrometheus's error when the binary is missing; tests skip on it.
var ErrNoPrometheus = fmt.Errorf("prometheus is not installed (Debian package prometheus; hack/install-deps.sh installs it)")

// Prometheus is a real Prometheus server (Debian's package) a test started.
type Prometheus struct {
	URL    string // http://127.0.0.1:port
	Port   int
	LogDir string
	stop   func()
}

// Stop stops it (SIGTERM, then SIGKILL after 10 s). It is safe to call twice.
func (p *Prometheus) Stop() { p.stop() }

// StartPrometheus runs prometheus on a free loopback port with rules (a rule file's text, evaluated
// every second) and waits until it is ready. Its data and log stay in dir.
func StartPrometheus(dir, rules string) (*Prometheus, error) {
	return StartPrometheusWith(dir, PrometheusConfig{Rules: rules})
}

// PrometheusConfig is what StartPrometheusWith runs: rules evaluated every second, targets scraped
// every second (each with its labels), on Port (0: a free one; the same port again to restart one).
type PrometheusConfig struct {
	Rules   string
	Targets []ScrapeTarget
	Port    int
}

// ScrapeTarget is one host:port whose /metrics Prometheus scrapes, with labels added to its series.
type ScrapeTarget struct {
	Job, Address string
	Labels       map[string]string
}

// StartPrometheusWith is StartPrometheus with scrape targets and a chosen port.
func StartPrometheusWith(dir string, c PrometheusConfig) (*Prometheus, error) {
	if err := RefuseUnderShort("prometheus"); err != nil {
		return nil, err
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		return nil, ErrNoPrometheus
	}
	config := "global:\n  evaluation_interval: 1s\n  scrape_interval: 1s\nrule_files:\n  - rules.yml\n"
	if len(c.Targets) > 0 {
		config += "scrape_configs:\n"
		for _, t := range c.Targets {
			labels, _ := json.Marshal(t.Labels)
			config += fmt.Sprintf("  - job_name: %q\n    static_configs:\n      - targets: [%q]\n        labels: %s\n", t.Job, t.Address, labels)
		}
	}
	for name, text := range map[string]string{"prometheus.yml": config, "rules.yml": c.Rules} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	port := c.Port
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	p := &Prometheus{URL: "http://" + addr, LogDir: dir, Port: port}
	p.stop = stopper(cmd, exited)
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(60 * time.Second); ; {
		if resp, err := client.Get(p.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			return nil, fmt.Errorf("prometheus exited at start:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("prometheus not ready after 60s; see %s", filepath.Join(dir, "prometheus.log"))
		}
	}
}

// stopper stops a started process (SIGTERM, then SIGKILL after 10 s) once, however often it is called;
// exited is closed when cmd.Wait returned.
func stopper(cmd *exec.Cmd, exited <-chan struct{}) func() {
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
}

// WaitFiring waits until alert is firing (rules are evaluated every second, so it is soon).
func (p *Prometheus) WaitFiring(alert string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := client.Get(p.URL + "/api/v1/alerts")
		if err != nil {
			continue
		}
		var body struct {
			Data struct {
				Alerts []struct {
					Labels map[string]string `json:"labels"`
					State  string            `json:"state"`
				} `json:"alerts"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			continue
		}
		for _, a := range body.Data.Alerts {
			if a.Labels["alertname"] == alert && a.State == "firing" {
				return nil
			}
		}
	}
	return fmt.Errorf("alert %s not firing after %s", alert, timeout)
}
