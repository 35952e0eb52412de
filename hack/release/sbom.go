package main

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// SBOM is a CycloneDX (JSON) bill of materials for the Go binary at path, from the build information
// the Go toolchain embedded in it: the main module as the application at version, every module linked
// in (replacements resolved), the Go standard library, and the build settings as properties. It
// describes exactly what was linked, not what go.mod lists.
func SBOM(path, name, version string) ([]byte, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, err
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	mainRef := purl(bi.Main.Path, version)
	props := []cdx.Property{{Name: "go:version", Value: bi.GoVersion}}
	for _, k := range []string{"GOOS", "GOARCH", "CGO_ENABLED", "-trimpath", "-ldflags", "vcs.revision", "vcs.time", "vcs.modified"} {
		if v, ok := settings[k]; ok {
			props = append(props, cdx.Property{Name: "go:build:" + k, Value: v})
		}
	}
	stdlib := cdx.Component{BOMRef: purl("stdlib", bi.GoVersion), Type: cdx.ComponentTypeLibrary, Name: "stdlib",
		Version: bi.GoVersion, PackageURL: purl("stdlib", bi.GoVersion)}
	components := []cdx.Component{stdlib}
	refs := []string{stdlib.BOMRef}
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		ref := purl(m.Path, m.Version)
		c := cdx.Component{BOMRef: ref, Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: ref}
		if m.Sum != "" {
			c.Properties = &[]cdx.Property{{Name: "go:module:sum", Value: m.Sum}}
		}
		if d.Replace != nil {
			c.Properties = appendProp(c.Properties, cdx.Property{Name: "go:module:replaces", Value: d.Path + "@" + d.Version})
		}
		components = append(components, c)
		refs = append(refs, ref)
	}
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: settings["vcs.time"],
		Component: &cdx.Component{BOMRef: mainRef, Type: cdx.ComponentTypeApplication, Name: name, Version: version,
			PackageURL: mainRef, Properties: &props},
	}
	bom.Components = &components
	deps := []cdx.Dependency{{Ref: mainRef, Dependencies: &refs}}
	for _, r := range refs {
		deps = append(deps, cdx.Dependency{Ref: r})
	}
	bom.Dependencies = &deps
	var b bytes.Buffer
	enc := cdx.NewBOMEncoder(&b, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.Encode(bom); err != nil {
		return nil, fmt.Errorf("encoding: %w", err)
	}
	return b.Bytes(), nil
}

// purl is the package URL of a Go module (pkg:golang, its path's segments as namespace and name).
func purl(path, version string) string {
	return "pkg:golang/" + strings.ToLower(path) + "@" + version
}

func appendProp(ps *[]cdx.Property, p cdx.Property) *[]cdx.Property {
	if ps == nil {
		return &[]cdx.Property{p}
	}
	out := append(*ps, p)
	return &out
}
