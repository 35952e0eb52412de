// Command e2e-hook is the before-reboot hook of the e2e suite, shaped as FLUO documents hooks: a
// DaemonSet selecting the before-reboot=true label runs it on a node waiting to reboot; after a delay
// it sets its annotation to "true" on that node, which lets the operator go on. Then it idles until
// the DaemonSet controller removes it (the label goes away).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	node, key := os.Getenv("NODE_NAME"), os.Getenv("HOOK_ANNOTATION")
	delay, err := time.ParseDuration(os.Getenv("HOOK_DELAY"))
	if node == "" || key == "" || err != nil {
		fmt.Fprintln(os.Stderr, "e2e-hook: set NODE_NAME, HOOK_ANNOTATION and HOOK_DELAY (a duration)")
		os.Exit(2)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e-hook:", err)
		os.Exit(1)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fmt.Printf("e2e-hook: holding %s for %s\n", node, delay)
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return
	}
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, key)
	for ctx.Err() == nil {
		_, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		if err == nil {
			fmt.Printf("e2e-hook: %s=true on %s\n", key, node)
			break
		}
		fmt.Fprintln(os.Stderr, "e2e-hook:", err)
		time.Sleep(2 * time.Second)
	}
	<-ctx.Done()
}
