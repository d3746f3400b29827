//go:build linux

package flux

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// object is what the tests read of a Flux object.
type object struct {
	Metadata struct {
		Generation  int64             `json:"generation"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Status struct {
		ObservedGeneration     int64  `json:"observedGeneration"`
		LastHandledReconcileAt string `json:"lastHandledReconcileAt"`
		LastAppliedRevision    string `json:"lastAppliedRevision"`
		Artifact               *struct {
			Revision string `json:"revision"`
			Digest   string `json:"digest"`
		} `json:"artifact"`
		Conditions []condition `json:"conditions"`
		History    []struct {
			ChartVersion string `json:"chartVersion"`
			Digest       string `json:"digest"`
			Version      int    `json:"version"`
		} `json:"history"`
	} `json:"status"`
}

// condition is one of an object's status conditions.
type condition struct {
	Type, Status, Reason, Message string
}

// cond returns the condition typ of o, or a zero one.
func (o object) cond(typ string) condition {
	for _, c := range o.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return condition{}
}

// ready says whether o reconciled its latest generation and is Ready.
func (o object) ready() bool {
	return o.Status.ObservedGeneration == o.Metadata.Generation && o.cond("Ready").Status == "True"
}

func (o object) String() string {
	var cs []string
	for _, c := range o.Status.Conditions {
		cs = append(cs, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("generation %d observed %d, %s", o.Metadata.Generation, o.Status.ObservedGeneration, strings.Join(cs, "; "))
}

// get reads the object kind (e.g. helmrelease) ns/name.
func (f *fluxCD) get(t *testing.T, kind, ns, name string) object {
	t.Helper()
	var o object
	if err := json.Unmarshal([]byte(f.kubectl(t, nil, "-n", ns, "get", kind, name, "-o", "json")), &o); err != nil {
		t.Fatalf("decoding %s %s/%s: %v", kind, ns, name, err)
	}
	return o
}

// wait waits up to two minutes until the object kind ns/name exists and
// done says it is as wanted, and returns it.
func (f *fluxCD) wait(t *testing.T, kind, ns, name, what string, done func(object) bool) object {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var o object
		if res := f.cluster.TryKubectl(nil, "-n", ns, "get", kind, name, "-o", "json"); res.Err == nil {
			out := res.Stdout
			if err := json.Unmarshal([]byte(out), &o); err != nil {
				t.Fatalf("decoding %s %s/%s: %v", kind, ns, name, err)
			}
			if done(o) {
				return o
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s/%s: not %s in 2 minutes: %v", kind, ns, name, what, o)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reconcile asks the object kind ns/name to reconcile now, as `flux
// reconcile` does (the annotation reconcile.fluxcd.io/requestedAt), and
// waits until it has handled that request and is Ready.
func (f *fluxCD) reconcile(t *testing.T, kind, ns, name string) object {
	t.Helper()
	at := f.requestReconcile(t, kind, ns, name)
	return f.wait(t, kind, ns, name, "reconciled at "+at, func(o object) bool {
		return o.Status.LastHandledReconcileAt == at && o.ready()
	})
}

// requestReconcile asks the object kind ns/name to reconcile now and
// returns the request's value, which status.lastHandledReconcileAt takes
// once the controller has handled it.
func (f *fluxCD) requestReconcile(t *testing.T, kind, ns, name string) string {
	t.Helper()
	at := time.Now().UTC().Format(time.RFC3339Nano)
	f.kubectl(t, nil, "-n", ns, "annotate", "--overwrite", kind, name, "reconcile.fluxcd.io/requestedAt="+at)
	return at
}
