package policy

import (
	"encoding/json"
	"fmt"
)

// APIVersion names the format of Published: a reader refuses another (a newer operator's) rather than
// guess at it.
const APIVersion = "slipway.dev/policy/v1"

// Published is what the leading operator publishes of the policies it runs (in the slipway-fleet
// ConfigMap under key "policies"), so that kubectl slipway reads them with this type and compiles them
// with Compile: one parser for the flags, the published form and the view.
type Published struct {
	APIVersion string  `json:"apiVersion"`
	Policies   []Named `json:"policies"`
}

// Named is one policy: Name "" is the default policy (the flags).
type Named struct {
	Name string `json:"name"`
	Spec Spec   `json:"spec"`
}

// Publish renders the policies as published.
func Publish(ps ...Named) string {
	raw, err := json.Marshal(Published{APIVersion: APIVersion, Policies: ps})
	if err != nil {
		panic(err) // a Spec is plain data: it always marshals
	}
	return string(raw)
}

// ReadPublished decodes what Publish wrote.
func ReadPublished(s string) (Published, error) {
	var p Published
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return p, fmt.Errorf("published policies: %w", err)
	}
	if p.APIVersion != APIVersion {
		return p, fmt.Errorf("published policies are %q; this build reads %q: upgrade kubectl-slipway to the operator's version", p.APIVersion, APIVersion)
	}
	return p, nil
}

// Default is the default policy's Spec; ok false when none was published.
func (p Published) Default() (Spec, bool) {
	for _, n := range p.Policies {
		if n.Name == "" {
			return n.Spec, true
		}
	}
	return Spec{}, false
}

// Compiled reports whether p was built by Compile (and so carries the Spec it runs): a Policy put
// together field by field (tests, embedders) has no Spec to publish.
func (p *Policy) Compiled() bool { return p.Spec.MaxUnavailable != "" }
