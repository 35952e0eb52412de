package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// valuesImage are values.yaml's image.repository, image.tag and image.digest lines (two-space indent
// under image:).
var (
	valuesRepo   = regexp.MustCompile(`(?m)^(  repository: )\S+$`)
	valuesTag    = regexp.MustCompile(`(?m)^(  tag: )\S+$`)
	valuesDigest = regexp.MustCompile(`(?m)^(  digest: )\S+$`)
)

// PackageChart writes the chart in dir to out as `helm package` does, at the release's version:
// version X.Y.Z, appVersion and image.tag V, image.repository c.Image, image.digest digest (the
// chart then pulls repository:tag@digest). values.yaml keeps its comments (Helm packages it as
// written). Returns the archive's name.
func PackageChart(dir, out string, c Config, digest string) (string, error) {
	if !sha256Digest.MatchString(digest) {
		return "", fmt.Errorf("the chart's image digest %q: want sha256:<64 hex>", digest)
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("the chart %s: %w", dir, err)
	}
	ch.Metadata.Version = strings.TrimPrefix(c.Version, "v")
	ch.Metadata.AppVersion = c.Version
	image, ok := ch.Values["image"].(map[string]any)
	if !ok {
		return "", fmt.Errorf("the chart's values.yaml has no image block")
	}
	image["repository"], image["tag"], image["digest"] = c.Image, c.Version, digest
	found := false
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		n, m, d := len(valuesRepo.FindAll(f.Data, -1)), len(valuesTag.FindAll(f.Data, -1)), len(valuesDigest.FindAll(f.Data, -1))
		if n != 1 || m != 1 || d != 1 {
			return "", fmt.Errorf("the chart's values.yaml: want one image repository, tag and digest line, found %d, %d and %d", n, m, d)
		}
		f.Data = valuesRepo.ReplaceAll(f.Data, []byte("${1}"+c.Image))
		f.Data = valuesTag.ReplaceAll(f.Data, []byte("${1}"+c.Version))
		f.Data = valuesDigest.ReplaceAll(f.Data, []byte("${1}"+digest))
		found = true
	}
	if !found {
		return "", fmt.Errorf("the chart has no %s", chartutil.ValuesfileName)
	}
	path, err := chartutil.Save(ch, out)
	if err != nil {
		return "", fmt.Errorf("packaging the chart: %w", err)
	}
	if want := ChartName(c.Version); filepath.Base(path) != want {
		return "", fmt.Errorf("helm wrote %s, want %s", filepath.Base(path), want)
	}
	return filepath.Base(path), nil
}
