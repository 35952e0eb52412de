package updateengine_test

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/slipway-dev/slipway/internal/login1"
	"github.com/slipway-dev/slipway/internal/testsupport/standin"
	"github.com/slipway-dev/slipway/internal/testsupport/testenv"
	"github.com/slipway-dev/slipway/internal/updateengine"
)

func startBus(t *testing.T) *testenv.Bus {
	t.Helper()
	testenv.NeedRealParts(t, "dbus-daemon")
	bus, err := testenv.StartBus(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Stop)
	return bus
}

func next(t *testing.T, ch <-chan updateengine.Status) updateengine.Status {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no status within 10s")
	}
	return updateengine.Status{}
}

// Against a real dbus-daemon: GetStatus from the stand-in, signals from update_engine and from a
// third party (as locksmithctl sends them), and bodies of the wrong shape reported and skipped.
func TestWatchOverRealBus(t *testing.T) {
	bus := startBus(t)
	ueConn, err := bus.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer ueConn.Close()
	ue, err := standin.ServeUpdateEngine(ueConn, "4500.0.0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan updateengine.Status, 32)
	var mu sync.Mutex
	var problems []string
	go updateengine.Watch(ctx, bus.Connect, out, func(err error) {
		mu.Lock()
		problems = append(problems, err.Error())
		mu.Unlock()
	})
	if s := next(t, out); s.CurrentOperation != updateengine.StatusIdle || s.NewVersion != "0.0.0" {
		t.Fatalf("GetStatus at start: %+v", s)
	}

	// A wrong-shape body from another sender, then a correct one.
	other, err := bus.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Emit(updateengine.ObjectPath, updateengine.Interface+".StatusUpdate", "garbage", int32(3)); err != nil {
		t.Fatal(err)
	}
	if err := updateengine.SendNeedReboot(other); err != nil {
		t.Fatal(err)
	}
	if s := next(t, out); s.CurrentOperation != updateengine.StatusUpdatedNeedReboot || s.NewVersion != "" {
		t.Fatalf("send-need-reboot from a third party: %+v", s)
	}
	mu.Lock()
	if len(problems) != 1 || !strings.Contains(problems[0], "2 fields") {
		t.Errorf("want one problem about the bad body, got %q", problems)
	}
	mu.Unlock()

	// The stand-in's AttemptUpdate path, through the D-Bus method.
	call := other.Object(updateengine.BusName, updateengine.ObjectPath).Call(updateengine.MethodAttemptUpdate, 0)
	if call.Err != nil {
		t.Fatal(call.Err)
	}
	var ops []string
	for len(ops) == 0 || ops[len(ops)-1] != updateengine.StatusUpdatedNeedReboot {
		ops = append(ops, next(t, out).CurrentOperation)
	}
	if len(ops) != 6 || ops[0] != updateengine.StatusCheckingForUpdate {
		t.Errorf("AttemptUpdate steps: %v", ops)
	}
	got, err := updateengine.NewClient(other).GetStatus(ctx)
	if err != nil || got.NewVersion != "4500.0.0" || !got.NeedsReboot() {
		t.Errorf("GetStatus after update: %+v, %v", got, err)
	}
	if ue.Status().NewVersion != "4500.0.0" {
		t.Errorf("stand-in status: %+v", ue.Status())
	}
}

// Watch survives the bus going away and picks update_engine up again when a bus is back at the same
// address (dbus-daemon restarted), asking GetStatus again so nothing said meanwhile is lost.
func TestWatchReconnects(t *testing.T) {
	testenv.NeedRealParts(t, "dbus-daemon")
	dir := t.TempDir()
	serve := func(s updateengine.Status) *testenv.Bus {
		bus, err := testenv.StartBus(dir)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := bus.Connect()
		if err != nil {
			t.Fatal(err)
		}
		ue, err := standin.ServeUpdateEngine(conn, "4500.0.0")
		if err != nil {
			t.Fatal(err)
		}
		if err := ue.Set(s); err != nil {
			t.Fatal(err)
		}
		return bus
	}
	bus := serve(updateengine.Status{CurrentOperation: updateengine.StatusIdle})
	addr := "unix:path=" + filepath.Join(dir, "system_bus_socket")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan updateengine.Status, 32)
	go updateengine.Watch(ctx, func(opts ...dbus.ConnOption) (*dbus.Conn, error) { return testenv.DialBus(addr, opts...) }, out, func(error) {})
	if s := next(t, out); s.CurrentOperation != updateengine.StatusIdle {
		t.Fatalf("first status: %+v", s)
	}
	bus.Stop()
	bus = serve(updateengine.Status{CurrentOperation: updateengine.StatusUpdatedNeedReboot, NewVersion: "4500.0.0"})
	defer bus.Stop()
	if s := next(t, out); !s.NeedsReboot() {
		t.Fatalf("after the bus came back: %+v", s)
	}
}

func TestLogin1StandIn(t *testing.T) {
	bus := startBus(t)
	conn, err := bus.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rebooted := make(chan bool, 1)
	l, err := standin.ServeLogin1(conn, func(interactive bool) { rebooted <- interactive })
	if err != nil {
		t.Fatal(err)
	}
	client, err := bus.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	r := login1.NewRebooter(client)
	l.FailNext(1)
	if err := r.Reboot(context.Background()); err == nil || !strings.Contains(err.Error(), "reboot refused") {
		t.Fatalf("refused reboot must surface as an error, got %v", err)
	}
	if err := r.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case interactive := <-rebooted:
		if interactive {
			t.Error("Reboot must be called with interactive=false")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reboot callback not called")
	}
	if calls := l.Calls(); len(calls) != 2 || calls[0] || calls[1] {
		t.Errorf("calls = %v", calls)
	}
}

// Anyone on the bus may emit StatusUpdate on update_engine's path. A flood while the agent is busy
// must not pile up goroutines (godbus's default handler starts one per signal that finds its channel
// full) and must not lose the status: signals beyond the queue are dropped, said so, and GetStatus is
// asked instead.
func TestWatchSignalFloodIsBounded(t *testing.T) {
	bus := startBus(t)
	ueConn, err := bus.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer ueConn.Close()
	ue, err := standin.ServeUpdateEngine(ueConn, "4500.0.0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan updateengine.Status) // nobody reads while the flood runs: the agent is busy
	var mu sync.Mutex
	var problems []string
	var watcher *dbus.Conn // the watcher's own connection, for the round trip below
	dial := func(opts ...dbus.ConnOption) (*dbus.Conn, error) {
		c, err := bus.Connect(opts...)
		mu.Lock()
		watcher = c
		mu.Unlock()
		return c, err
	}
	go updateengine.Watch(ctx, dial, out, func(err error) {
		mu.Lock()
		problems = append(problems, err.Error())
		mu.Unlock()
	})
	if s := next(t, out); s.CurrentOperation != updateengine.StatusIdle {
		t.Fatalf("GetStatus at start: %+v", s)
	}
	before := runtime.NumGoroutine()

	flooder, err := bus.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer flooder.Close()
	const flood = 20000
	body := updateengine.Status{CurrentOperation: updateengine.StatusCheckingForUpdate, NewVersion: "0.0.0"}.Body()
	for i := 0; i < flood; i++ {
		if err := flooder.Emit(updateengine.ObjectPath, updateengine.Interface+"."+updateengine.SignalStatusUpdate, body...); err != nil {
			t.Fatal(err)
		}
	}
	// The real state at the end of the flood: update_engine staged an update.
	if err := ue.Set(updateengine.Status{CurrentOperation: updateengine.StatusUpdatedNeedReboot, NewVersion: "4500.0.0"}); err != nil {
		t.Fatal(err)
	}
	// A round trip on the flooder's connection after its last Emit: the bus has routed the flood by
	// the time a method call to update_engine answers (messages from one connection keep their order).
	if _, err := updateengine.NewClient(flooder).GetStatus(ctx); err != nil {
		t.Fatal(err)
	}
	// Then a round trip on the watcher's own connection: the bus answers after it has queued the flood
	// to that connection, and godbus's reader hands every signal before the reply to the watcher's
	// handler, so when the call returns the watcher has taken the whole flood.
	mu.Lock()
	wc := watcher
	mu.Unlock()
	var id string
	if err := wc.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetId", 0).Store(&id); err != nil {
		t.Fatal(err)
	}
	peak := runtime.NumGoroutine()
	if grown := peak - before; grown > 20 {
		t.Errorf("goroutines grew by %d during a flood of %d signals (before %d); the queue must bound them", grown, flood, before)
	}
	// Now the agent reads again: it ends at the real status.
	deadline := time.After(20 * time.Second)
	for got := 0; ; got++ {
		var s updateengine.Status
		select {
		case s = <-out:
		case <-deadline:
			t.Fatalf("never reached update_engine's real status after the flood (read %d)", got)
		}
		if s.NeedsReboot() && s.NewVersion == "4500.0.0" {
			if got > 200 {
				t.Errorf("read %d statuses to get past the flood; at most the queue (64) plus resyncs expected", got)
			}
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	dropped := false
	for _, p := range problems {
		dropped = dropped || strings.Contains(p, "dropped")
	}
	if !dropped {
		t.Errorf("no problem reported about dropped signals: %q", problems)
	}
}
