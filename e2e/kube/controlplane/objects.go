//go:build linux

package controlplane

import (
	"context"
	"fmt"
	"net/url"
	"time"
)

// ReplicaSets returns the number of ReplicaSets of each Deployment in the
// namespace ns (0 for one with none), once the deployment controller has
// seen the latest generation of every Deployment: it makes a Deployment's
// new ReplicaSet before it records the generation it observed, so a count
// taken earlier could miss the one a change makes. It waits up to a
// minute for that.
func (c *Cluster) ReplicaSets(ctx context.Context, ns string) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var deps struct {
			Items []struct {
				Metadata struct {
					Name       string `json:"name"`
					Generation int64  `json:"generation"`
				} `json:"metadata"`
				Status struct {
					ObservedGeneration int64 `json:"observedGeneration"`
				} `json:"status"`
			} `json:"items"`
		}
		base := "/apis/apps/v1/namespaces/" + url.PathEscape(ns)
		if err := c.GetJSON(ctx, base+"/deployments", &deps); err != nil {
			return nil, fmt.Errorf("listing the Deployments of %s: %w", ns, err)
		}
		counts := map[string]int{}
		pending := ""
		for _, d := range deps.Items {
			counts[d.Metadata.Name] = 0
			if d.Status.ObservedGeneration < d.Metadata.Generation {
				pending = d.Metadata.Name
			}
		}
		if pending == "" {
			var rss struct {
				Items []struct {
					Metadata struct {
						OwnerReferences []struct {
							Kind string `json:"kind"`
							Name string `json:"name"`
						} `json:"ownerReferences"`
					} `json:"metadata"`
				} `json:"items"`
			}
			if err := c.GetJSON(ctx, base+"/replicasets", &rss); err != nil {
				return nil, fmt.Errorf("listing the ReplicaSets of %s: %w", ns, err)
			}
			for _, rs := range rss.Items {
				for _, o := range rs.Metadata.OwnerReferences {
					if o.Kind == "Deployment" {
						counts[o.Name]++
					}
				}
			}
			return counts, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("Deployment %s/%s: its latest generation not observed in a minute", ns, pending)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitEstablished waits until each CustomResourceDefinition named (e.g.
// applications.argoproj.io) has the condition Established, for up to a
// minute: objects of a kind whose CRD is not yet established are refused.
func (c *Cluster) WaitEstablished(ctx context.Context, crds ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, name := range crds {
		for {
			var crd struct {
				Status struct {
					Conditions []struct{ Type, Status string }
				}
			}
			err := c.GetJSON(ctx, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+url.PathEscape(name), &crd)
			if err == nil && established(crd.Status.Conditions) {
				break
			}
			select {
			case <-ctx.Done():
				if err == nil {
					err = fmt.Errorf("not Established")
				}
				return fmt.Errorf("CRD %s: %w in a minute", name, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// established reports whether conditions hold Established True.
func established(conditions []struct{ Type, Status string }) bool {
	for _, cond := range conditions {
		if cond.Type == "Established" && cond.Status == "True" {
			return true
		}
	}
	return false
}
