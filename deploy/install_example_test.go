package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	docpages "github.com/slipway-dev/slipway/internal/testsupport/docs"
	"github.com/slipway-dev/slipway/operator/window"
)

// The kustomize example users copy installs the image they pushed, at the release's tag, with the
// policy flags it shows appended to the operator's: nothing it renders pulls the unpublished image.
func TestInstallExample(t *testing.T) {
	base, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tag := regexp.MustCompile(`newTag:\s*(\S+)`).FindStringSubmatch(string(base))
	if tag == nil {
		t.Fatal("deploy/kustomization.yaml pins no tag")
	}
	rendered := kustomize(t, "examples/install")
	images := regexp.MustCompile(`(?m)^\s*(?:-\s+)?image:\s*"?([^"\s]+)`).FindAllStringSubmatch(rendered, -1)
	if len(images) < 2 {
		t.Fatalf("the example renders %d images, want the operator's and the agent's", len(images))
	}
	for _, m := range images {
		if m[1] != "YOUR-REGISTRY/slipway:"+tag[1] {
			t.Errorf("the example renders image %q, want YOUR-REGISTRY/slipway:%s", m[1], tag[1])
		}
	}
	var args []string
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil || d.Kind != "Deployment" || d.Name != "slipway-update-operator" {
			continue
		}
		args = d.Spec.Template.Spec.Containers[0].Args
	}
	if len(args) < 2 || args[len(args)-2] != "--reboot-window=Mon-Fri 22:00-05:00 Europe/Berlin" || args[len(args)-1] != "--max-unavailable=10%" {
		t.Fatalf("operator args %q: want the example's policy flags last (a flag given again wins)", args)
	}
	if _, err := window.ParseWindow(strings.TrimPrefix(args[len(args)-2], "--reboot-window=")); err != nil {
		t.Error(err)
	}
}

// No install command in the README or docs pulls the image this repository names but no registry
// serves (ghcr.io/slipway-dev/slipway) or applies an overlay that does: they use the release's
// install.yaml, the chart, or the kustomize example with the image you pushed.
func TestDocsPullNoUnpublishedImage(t *testing.T) {
	text := docpages.All(t, "..")
	bad := regexp.MustCompile("ghcr\\.io/slipway-dev/slipway:|apply -k deploy/?(fleetlock|fleetlock-central|node-prep)?/?(\\s|`|$)")
	for i, line := range strings.Split(text, "\n") {
		if m := bad.FindString(line); m != "" {
			t.Errorf("docs line %d tells people to pull an unpublished image (%q): %s", i+1, strings.TrimSpace(m), strings.TrimSpace(line))
		}
	}
}
