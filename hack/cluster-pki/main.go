// Command cluster-pki prints, as Terraform variables (JSON, for a *.auto.tfvars.json file), what a
// new kubeadm cluster from terraform/ needs and offline Terraform cannot make (the hashicorp/tls
// provider is not available without the registry): a cluster CA, an admin client certificate signed
// by it, and a kubeadm bootstrap token.
//
//	go run ./hack/cluster-pki > terraform/examples/libvirt/secrets.auto.tfvars.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/slipway-dev/slipway/internal/clusterpki"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: cluster-pki > secrets.auto.tfvars.json (no arguments)")
		os.Exit(2)
	}
	s, err := clusterpki.New(time.Now(), 10*365*24*time.Hour)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster-pki:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-pki:", err)
		os.Exit(1)
	}
}
