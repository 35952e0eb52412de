// Package health holds admissions while a workload the operator is told to watch is unhealthy:
// --health-check='RESOURCE.GROUP/NAME[@NAMESPACE]: CEL' names one object and a CEL expression over
// it (`object`), evaluated with the Kubernetes CEL environment (the libraries ValidatingAdmissionPolicy
// uses) against the live object before admissions (one answer serves every decision for 2 s,
// Blocker.TTL). It fails closed: an object that is missing, an expression that errors or is not a
// bool, an API refusal (RBAC) all hold every waiting node, with that as the reason.
package health

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
)

// Name is the blocker's name and its block kind.
const Name = "health"

// costLimit bounds one evaluation (CEL cost units; ValidatingAdmissionPolicy allows 1e6 per
// expression): an expression over a large object cannot stall admissions.
const costLimit = 1_000_000

// Check is one --health-check.
type Check struct {
	Spec      string // as given
	Resource  schema.GroupResource
	Name      string
	Namespace string // "" for cluster-scoped objects
	Expr      string
	prog      cel.Program
}

// Object is the object's part of the spec, "deployments.apps/web@shop".
func (c *Check) Object() string {
	s := c.Resource.String() + "/" + c.Name
	if c.Namespace != "" {
		s += "@" + c.Namespace
	}
	return s
}

const syntax = `want "RESOURCE.GROUP/NAME[@NAMESPACE]: CEL", e.g. "deployments.apps/web@shop: object.status.availableReplicas >= object.spec.replicas"`

var env = func() *cel.Env {
	set, err := environment.MustBaseEnvSet(version.MajorMinor(1, 30)).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable("object", cel.DynType)},
	})
	if err != nil {
		panic(err)
	}
	e, err := set.Env(environment.NewExpressions)
	if err != nil {
		panic(err)
	}
	return e
}()

// Parse reads and compiles one --health-check. The error names the bad part.
func Parse(spec string) (*Check, error) {
	ref, expr, ok := strings.Cut(spec, ":")
	// No part of the object holds a space, so spaces in it are dropped: deploy/health-check writes
	// "deployments . apps / web @ shop : ..." (kustomize fills in each word) and means the same.
	ref, expr = strings.Join(strings.Fields(ref), ""), strings.TrimSpace(expr)
	if !ok || ref == "" || expr == "" {
		return nil, fmt.Errorf("%q: %s", spec, syntax)
	}
	c := &Check{Spec: spec, Expr: expr}
	res, name, ok := strings.Cut(ref, "/")
	if !ok || res == "" || name == "" {
		return nil, fmt.Errorf("%q: object %q: %s", spec, ref, syntax)
	}
	if n, ns, ok := strings.Cut(name, "@"); ok {
		name = n
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("%q: namespace %q: %s", spec, ns, strings.Join(errs, "; "))
		}
		c.Namespace = ns
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("%q: name %q: %s", spec, name, strings.Join(errs, "; "))
	}
	c.Name = name
	c.Resource = schema.ParseGroupResource(res)
	if errs := validation.IsDNS1123Label(c.Resource.Resource); len(errs) > 0 {
		return nil, fmt.Errorf("%q: resource %q: want the plural lower-case resource name, e.g. deployments.apps or configmaps", spec, res)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%q: expression: %v", spec, iss.Err())
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("%q: expression evaluates to %s, want bool", spec, t)
	}
	prog, err := env.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, fmt.Errorf("%q: expression: %v", spec, err)
	}
	c.prog = prog
	return c, nil
}

// Blocker holds every waiting node while a check does not hold (admission.Blocker, fleet-wide).
type Blocker struct {
	Checks []*Check
	Client dynamic.Interface
	Mapper meta.ResettableRESTMapper
	// TTL is how long one answer is reused (DefaultTTL when 0): every waiting node's decision asks the
	// fleet-wide blockers, and without it each asked the API server for every checked object again.
	TTL time.Duration
	Now func() time.Time // nil: time.Now
	// Log gets the full text of an evaluation error, at debug level (V(4)): it may hold the object's
	// values, so it goes only to the operator's own log, never to a reason. Zero: discarded.
	Log klog.Logger

	mu      sync.Mutex // held across the checks: concurrent decisions wait for one answer
	reset   time.Time  // the mapper's last Reset (a new discovery of the whole API)
	at      time.Time  // when the cached answer was made; zero: none
	blocked bool
	reason  string
}

// ResetEvery bounds how often a check of a resource the mapper does not know rediscovers the API.
const ResetEvery = time.Minute

func (b *Blocker) clock() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// DefaultTTL is Blocker.TTL's default: short against the blocker retry (10 s), long against a burst of
// decisions.
const DefaultTTL = 2 * time.Second

func (b *Blocker) Name() string    { return Name }
func (b *Blocker) FleetWide() bool { return true }

// Check evaluates every check against its live object; the first that does not hold blocks. An answer
// is reused for TTL.
func (b *Blocker) Check(ctx context.Context, _ *corev1.Node) (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now, ttl := time.Now, b.TTL
	if b.Now != nil {
		now = b.Now
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if t := now(); !b.at.IsZero() && !t.Before(b.at) && t.Sub(b.at) < ttl {
		return b.blocked, b.reason
	}
	b.blocked, b.reason = false, ""
	for _, c := range b.Checks {
		if why := b.check(ctx, c); why != "" {
			b.blocked, b.reason = true, c.Object()+": "+why
			break
		}
	}
	if ctx.Err() != nil {
		b.at = time.Time{} // an answer cut short by the caller is not kept
	} else {
		b.at = now()
	}
	return b.blocked, b.reason
}

func (b *Blocker) check(ctx context.Context, c *Check) string {
	gvr, err := b.Mapper.ResourceFor(c.Resource.WithVersion(""))
	if meta.IsNoMatchError(err) && b.clock().Sub(b.reset) >= ResetEvery {
		// A CRD installed since: look again, at most once per ResetEvery (a check of a resource that
		// does not exist would otherwise rediscover the whole API on every evaluation).
		b.Mapper.Reset()
		b.reset = b.clock()
		gvr, err = b.Mapper.ResourceFor(c.Resource.WithVersion(""))
	}
	if err != nil {
		return "no such resource in the cluster: " + err.Error()
	}
	var r dynamic.ResourceInterface = b.Client.Resource(gvr)
	if c.Namespace != "" {
		r = b.Client.Resource(gvr).Namespace(c.Namespace)
	}
	obj, err := r.Get(ctx, c.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "not found"
	case apierrors.IsForbidden(err):
		return "the operator may not read it (RBAC: get " + c.Resource.String() + "): " + err.Error()
	case err != nil:
		// The status reason only: a conversion webhook's or an aggregated API's error text may quote
		// the object. The full error goes to the operator's log.
		b.Log.V(4).Info("health check: reading the object failed", "check", c.Object(), "error", err.Error())
		return fmt.Sprintf("reading it: %s (HTTP %d)", apierrors.ReasonForError(err), statusCode(err))
	}
	why, detail := c.judge(ctx, obj.Object)
	if detail != nil { // a zero Log discards it
		b.Log.V(4).Info("health check: evaluation error (its full text, which may quote the object)", "check", c.Object(), "expression", c.Expr, "error", detail.Error())
	}
	return why
}

// judge evaluates the expression on object: "" when it holds, else why not. blocked-by, the Event and
// the notifications are read by every agent and by whoever may read Nodes, and a CEL runtime error can
// carry the object's values (a missing map key is named unquoted, a conversion error names the string
// it could not convert): a runtime error is said by its kind only, and its full text returned as
// detail for the operator's own log. A non-bool result is named by type only. Compile errors never get
// here: Parse refuses them, with their text (the spec's own).
func (c *Check) judge(ctx context.Context, object map[string]any) (why string, detail error) {
	out, _, err := c.prog.ContextEval(ctx, map[string]any{"object": object})
	if err != nil {
		// Not even a missing key that looks like the expression's own word: the key is whatever the
		// index evaluated to ({'':true}[object.x.substring(0,1)] names one character of a value).
		return c.Expr + ": evaluation error (" + evalErrorKind(err) + ")", err
	}
	v, ok := out.Value().(bool)
	if !ok {
		return fmt.Sprintf("%s: evaluates to a %s, want bool", c.Expr, out.Type().TypeName()), nil
	}
	if !v {
		return c.Expr + " is false", nil
	}
	return "", nil
}

// evalKinds map what cel-go's and the Kubernetes libraries' runtime errors start or contain to a kind
// that names no value, first match wins.
var evalKinds = []struct{ match, kind string }{
	{"no such key", "no such key"},
	{"no such attribute", "no such field"},
	{"no such field", "no such field"},
	{"no such overload", "no matching overload"},
	{"no matching overload", "no matching overload"},
	{"division by zero", "division by zero"},
	{"modulus by zero", "modulus by zero"},
	{"overflow", "overflow"},
	{"cost limit", "cost limit exceeded"},
	{"interrupted", "interrupted"},
	{"context", "interrupted"},
	{"type conversion", "conversion error"},
	{"range error", "conversion error"},
	{"invalid", "invalid argument"},
	{"parse error", "invalid argument"},
	{"index out of", "index out of range"},
	{"out of range", "index out of range"},
}

// statusCode is the HTTP status of an API error (0: none, e.g. a network error).
func statusCode(err error) int32 {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Code
	}
	return 0
}

// evalErrorKind names a CEL runtime error by its kind only ("no such key", "conversion error", ...;
// "other" when none fits): never a value.
func evalErrorKind(err error) string {
	s := strings.ToLower(err.Error())
	for _, k := range evalKinds {
		if strings.Contains(s, k.match) {
			return k.kind
		}
	}
	return "other"
}
