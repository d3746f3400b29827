package detgen

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// The functions here keep Helm's behaviour: their results depend on the
// clock or the cluster, which no seed can fix. Each call that reads either
// is recorded for Varying, so the person rendering is told what still
// changes between renders.

func (g *Generator) nowFunc(c *call) time.Time {
	g.vary(c, "the current time")
	return g.now()
}

// ago is sprig's: the time since a date (a time.Time or Unix seconds,
// anything else: now), rounded to seconds. It reads the clock either way.
func (g *Generator) ago(c *call, date any) string {
	var t time.Time
	switch d := date.(type) {
	case time.Time:
		t = d
	case int64:
		t = time.Unix(d, 0)
	case int:
		t = time.Unix(int64(d), 0)
	default:
		t = g.now()
	}
	g.vary(c, "the time since a date")
	return g.now().Sub(t).Round(time.Second).String()
}

// dateIn is sprig's dateInZone: a time.Time, *time.Time or Unix seconds
// (int, int32, int64) formatted in zone (UTC if zone is unknown); any other
// date is the current time, which is recorded.
func (g *Generator) dateIn(c *call, layout string, date any, zone string) string {
	var t time.Time
	switch d := date.(type) {
	case time.Time:
		t = d
	case *time.Time:
		t = *d
	case int64:
		t = time.Unix(d, 0)
	case int:
		t = time.Unix(int64(d), 0)
	case int32:
		t = time.Unix(int64(d), 0)
	default:
		g.vary(c, "no time given: formats the current time")
		t = g.now()
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		loc = time.UTC
	}
	return t.In(loc).Format(layout)
}

func (g *Generator) date(c *call, layout string, date any) string {
	return g.dateIn(c, layout, date, "Local")
}

func (g *Generator) dateInZone(c *call, layout string, date any, zone string) string {
	return g.dateIn(c, layout, date, zone)
}

func (g *Generator) htmlDate(c *call, date any) string {
	return g.dateIn(c, "2006-01-02", date, "Local")
}

func (g *Generator) htmlDateInZone(c *call, date any, zone string) string {
	return g.dateIn(c, "2006-01-02", date, zone)
}

// durationRound is sprig's: a duration (string, int64 nanoseconds, or the
// time since a time.Time, which reads the clock and is recorded) in its
// largest whole unit: y (365 days), mo (30 days), d, h, m, s.
func (g *Generator) durationRound(c *call, duration any) string {
	var d time.Duration
	switch v := duration.(type) {
	case string:
		d, _ = time.ParseDuration(v)
	case int64:
		d = time.Duration(v)
	case time.Time:
		g.vary(c, "the time since a date")
		d = g.now().Sub(v)
	}
	u := uint64(d)
	if d < 0 {
		u = -u
	}
	const day = uint64(24 * time.Hour)
	for _, unit := range []struct {
		size uint64
		name string
	}{
		{365 * day, "y"}, {30 * day, "mo"}, {day, "d"},
		{uint64(time.Hour), "h"}, {uint64(time.Minute), "m"}, {uint64(time.Second), "s"},
	} {
		if u > unit.size {
			return strconv.FormatUint(u/unit.size, 10) + unit.name
		}
	}
	return "0s"
}

// LookupFunc is Helm's lookup: the object (or, with name "", the list) of
// apiVersion and kind in namespace from the cluster; an empty map when it is
// not there. Helm's engine.NewLookupFunction returns one.
type LookupFunc = func(apiVersion, kind, namespace, name string) (map[string]any, error)

// SetLookup makes lookup read the cluster through lookup (for install and
// upgrade). Without it, lookup returns an empty map, as helm template does.
// Every lookup call is recorded for Varying either way. Call it before Funcs.
func (g *Generator) SetLookup(lookup LookupFunc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lookup = lookup
}

func (g *Generator) lookupFunc(c *call, apiVersion, kind, namespace, name string) (map[string]any, error) {
	g.mu.Lock()
	cluster := g.lookup
	g.mu.Unlock()
	what := fmt.Sprintf("%s %s %s/%s", apiVersion, kind, namespace, name)
	if cluster == nil {
		g.vary(c, "reads the cluster (empty when rendering without one): "+what)
		return map[string]any{}, nil
	}
	g.vary(c, "reads the cluster: "+what)
	return cluster(apiVersion, kind, namespace, name)
}

// getHostByName is Helm's without --enable-dns: "". Its use is recorded,
// as the chart meant to read DNS.
func (g *Generator) getHostByName(c *call, name string) string {
	g.vary(c, "DNS lookup of "+name+" (empty: DNS lookups are off)")
	return ""
}

// sortedKeys is sprig's keys in sorted order per dict: sprig returns Go's
// randomised map order, which changes from render to render.
func sortedKeys(dicts ...map[string]any) []string {
	k := []string{}
	for _, d := range dicts {
		start := len(k)
		for key := range d {
			k = append(k, key)
		}
		sort.Strings(k[start:])
	}
	return k
}

// sortedValues is sprig's values in the order of the sorted keys.
func sortedValues(dict map[string]any) []any {
	vals := make([]any, 0, len(dict))
	for _, k := range sortedKeys(dict) {
		vals = append(vals, dict[k])
	}
	return vals
}
