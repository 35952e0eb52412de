package docsguard

import (
	"reflect"
	"testing"
)

func TestCommands(t *testing.T) {
	page := "intro\n" +
		"```sh\n" +
		"kubectl apply -f x.yaml   # applies\n" +
		"# a comment only\n" +
		"# or, Helm 4: helm install slipway c.tgz -n ns\n" +
		"kubectl -n ns set env deployment/d \\\n" +
		"  A=\"b c\"\n" +
		"\n" +
		"```\n" +
		"```\n" +
		"kubectl not a command: an output block\n" +
		"```\n" +
		"   ```bash\n" +
		"   make test\n" +
		"   ```\n"
	got := Commands("p.md", page)
	want := []Command{
		{"p.md", 3, "kubectl apply -f x.yaml   # applies"},
		{"p.md", 5, "helm install slipway c.tgz -n ns"},
		{"p.md", 6, `kubectl -n ns set env deployment/d A="b c"`},
		{"p.md", 14, "make test"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}
