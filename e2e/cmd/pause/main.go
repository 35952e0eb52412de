// Command pause is the sandbox ("pause") container of the e2e node image: it holds a pod's
// namespaces and waits for a signal. Built static, it is the only content of the image, so the
// e2e cluster needs no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	<-ch
}
