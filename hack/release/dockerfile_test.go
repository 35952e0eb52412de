package main

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// unpinnedBases are the Dockerfile's base images known to be pinned by tag only, and why. An entry
// is for a pin that cannot be made where the change was written; it makes TestDockerfileBasesPinned
// skip (saying so) instead of pass, and a stale entry fails.
var unpinnedBases = map[string]string{
	"golang:1.26-bookworm": "no container registry is reachable from the machine this was written on, so no digest of golang:1.26-bookworm could be read or checked; " +
		"pin it where one is (`docker buildx imagetools inspect golang:1.26-bookworm`, the index digest) and remove this entry. " +
		"The release does not use this image: hack/release builds the image with hack/ociimage from scratch",
}

var pinnedBase = regexp.MustCompile(`@sha256:[a-f0-9]{64}$`)

// Every FROM in the Dockerfile names its base by digest (scratch and earlier stages need none): a tag
// is a name its publisher, or whoever takes over the registry account, can point at other bytes.
func TestDockerfileBasesPinned(t *testing.T) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages := map[string]bool{}
	blocked := map[string]bool{}
	froms := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || !strings.EqualFold(fields[0], "FROM") {
			continue
		}
		froms++
		args := fields[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "--") { // --platform=…
			args = args[1:]
		}
		if len(args) == 0 {
			t.Errorf("Dockerfile:%d: FROM without an image", n)
			continue
		}
		base := args[0]
		switch {
		case base == "scratch", stages[strings.ToLower(base)]: // an earlier stage of this file
		case pinnedBase.MatchString(base):
		case unpinnedBases[base] != "":
			blocked[base] = true
		default:
			t.Errorf("Dockerfile:%d: FROM %s: pin it by digest (%s@sha256:…)", n, base, base)
		}
		if len(args) >= 3 && strings.EqualFold(args[1], "AS") {
			stages[strings.ToLower(args[2])] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if froms == 0 {
		t.Fatal("the Dockerfile has no FROM")
	}
	for base := range unpinnedBases {
		if !blocked[base] {
			t.Errorf("unpinnedBases lists %s, which no FROM names by tag any more: remove the entry", base)
		}
	}
	if t.Failed() {
		return
	}
	for base := range blocked {
		t.Skipf("FROM %s has no digest: %s", base, unpinnedBases[base])
	}
}
