package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/slipway-dev/slipway/internal/testsupport/operatorproc"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
)

// operators keeps a fixed number of real update-operator processes running, as a Deployment would:
// one that exits (killed by the scenario, or gone on its own after losing its lease) is replaced by a
// new process with a new identity. Each process logs to its own file.
type operators struct {
	bin, logDir string
	args        []string

	mu      sync.Mutex
	next    int
	running map[string]*operatorproc.Proc
	killed  map[string]bool
	exits   []string // exits the scenario did not cause: "op-3 (exit status 1)"
	fatal   error    // a process refused its flags: no point in restarting it
	wg      sync.WaitGroup
	// cp, when set, gives each process its own path to the API server: a Proxy the scenario can cut
	// (the leader partitioned from the API server while its process lives).
	cp      *testenv.ControlPlane
	proxies map[string]*testenv.Proxy
	cutOff  map[string]bool   // processes the scenario partitioned: their exit (lease lost) is expected
	bins    map[string]string // the binary each process runs (an upgrade replaces every old one)
}

func newOperators(bin, logDir string, args []string) *operators {
	return &operators{bin: bin, logDir: logDir, args: args, running: map[string]*operatorproc.Proc{}, killed: map[string]bool{},
		proxies: map[string]*testenv.Proxy{}, cutOff: map[string]bool{}, bins: map[string]string{}}
}

// run starts replicas slots; each keeps one process alive until ctx ends.
func (o *operators) run(ctx context.Context, replicas int) {
	for i := 0; i < replicas; i++ {
		o.wg.Add(1)
		go o.slot(ctx)
	}
}

func (o *operators) slot(ctx context.Context) {
	defer o.wg.Done()
	for ctx.Err() == nil {
		id, p, err := o.start()
		if err != nil {
			o.setFatal(err)
			return
		}
		<-p.Done()
		o.mu.Lock()
		delete(o.running, id)
		ours := o.killed[id] || o.cutOff[id]
		o.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		if !ours {
			if p.RefusedFlags() {
				o.setFatal(fmt.Errorf("update-operator %s refused its command line (exit 2): %s", id, testenv.LogTail(p.Log())))
				return
			}
			o.mu.Lock()
			o.exits = append(o.exits, fmt.Sprintf("%s (%v)", id, p.Err()))
			o.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (o *operators) setFatal(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fatal == nil {
		o.fatal = err
	}
}

func (o *operators) start() (string, *operatorproc.Proc, error) {
	o.mu.Lock()
	o.next++
	id := fmt.Sprintf("op-%d", o.next)
	bin := o.bin
	o.bins[id] = bin
	o.mu.Unlock()
	args := append(append([]string{}, o.args...), "--identity="+id)
	if o.cp != nil {
		px, err := testenv.StartProxy(o.cp.HostPort())
		if err != nil {
			return "", nil, err
		}
		kc := filepath.Join(o.logDir, id+".kubeconfig")
		if err := o.cp.WriteKubeconfig(kc, "https://"+px.Addr()); err != nil {
			px.Close()
			return "", nil, err
		}
		o.mu.Lock()
		o.proxies[id] = px // kept after the process ends: what it sent before it died may still be held
		o.mu.Unlock()
		args = append(args, "--kubeconfig="+kc) // the last --kubeconfig wins
	}
	p, err := operatorproc.Start(bin, args, filepath.Join(o.logDir, id+".log"))
	if err != nil {
		return "", nil, err
	}
	o.mu.Lock()
	o.running[id] = p
	o.mu.Unlock()
	return id, p, nil
}

// kill SIGKILLs the process with identity id (no lease release, as a crash or a node loss would).
func (o *operators) kill(id string) bool { return o.end(id, (*operatorproc.Proc).Kill) }

// end ends process id the way how does, as the scenario's doing (not an unexpected exit).
func (o *operators) end(id string, how func(*operatorproc.Proc)) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.running[id]
	if p == nil {
		return false
	}
	o.killed[id] = true
	go how(p)
	return true
}

// setBin makes every process started from now on run bin (a new release rolled out).
func (o *operators) setBin(bin string) { o.mu.Lock(); o.bin = bin; o.mu.Unlock() }

// notOn lists the processes running (or starting) another binary than bin.
func (o *operators) notOn(bin string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for id, b := range o.bins {
		if b != bin && !o.killed[id] && !o.cutOff[id] {
			out = append(out, id)
		}
	}
	return out
}

// terminate ends process id as a Deployment's rollout does (SIGTERM: it releases its Lease); its slot
// starts a replacement.
func (o *operators) terminate(id string) bool {
	return o.end(id, func(p *operatorproc.Proc) { p.Stop(10 * time.Second) })
}

// cut partitions process id from the API server (its Proxy holds every byte) until px.Heal is called.
func (o *operators) cut(id string) (px *testenv.Proxy, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	px = o.proxies[id]
	if px == nil || o.running[id] == nil || o.killed[id] {
		return nil, false
	}
	o.cutOff[id] = true
	px.Cut()
	return px, true
}

// stop kills every process and waits for the slots to end (ctx must be cancelled first).
func (o *operators) stop() {
	o.mu.Lock()
	for id, p := range o.running {
		o.killed[id] = true
		go p.Kill()
	}
	o.mu.Unlock()
	o.wg.Wait()
	o.mu.Lock()
	for _, px := range o.proxies {
		px.Close()
	}
	o.mu.Unlock()
}

func (o *operators) status() (started int, unexpected []string, fatal error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.next, append([]string(nil), o.exits...), o.fatal
}
