package pinflags

import (
	"encoding/csv"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/digestpin/digestpin/pin"
	"github.com/digestpin/digestpin/renderer"
	"github.com/digestpin/digestpin/resolve"
	"github.com/digestpin/digestpin/resolve/tagpolicy"
	"github.com/digestpin/digestpin/verify"
)

// The flags' values: each parses its argument at Set, straight into the
// library's option it binds, so that a value that cannot work fails as
// the flag (or its variable) is set, and pflag names the flag in the
// error.

// modeValue binds --mode onto a renderer.Mode.
type modeValue struct{ m *renderer.Mode }

func newModeValue(m *renderer.Mode, def renderer.Mode) modeValue {
	*m = def
	return modeValue{m}
}

func (v modeValue) String() string { return string(*v.m) }
func (modeValue) Type() string     { return "string" }

func (v modeValue) Set(s string) error {
	m, err := renderer.ParseMode(s)
	if err != nil {
		return errors.New("want pin, digest or annotate")
	}
	*v.m = m
	return nil
}

// onErrorValue binds --on-error onto renderer.Renderer.KeepUnresolved:
// fail is false, keep is true.
type onErrorValue struct{ keep *bool }

func newOnErrorValue(keep *bool) onErrorValue {
	*keep = false
	return onErrorValue{keep}
}

func (v onErrorValue) String() string {
	if *v.keep {
		return "keep"
	}
	return "fail"
}

func (onErrorValue) Type() string { return "string" }

func (v onErrorValue) Set(s string) error {
	switch s {
	case "fail", "keep":
		*v.keep = s == "keep"
		return nil
	}
	return errors.New("want fail or keep")
}

// mirrorLagValue binds --mirror-lag onto a resolve.MirrorLag.
type mirrorLagValue struct{ lag *resolve.MirrorLag }

func newMirrorLagValue(lag *resolve.MirrorLag) mirrorLagValue {
	*lag = resolve.MirrorLagError
	return mirrorLagValue{lag}
}

func (v mirrorLagValue) String() string { return v.lag.String() }

func (mirrorLagValue) Type() string { return "string" }

func (v mirrorLagValue) Set(s string) error {
	m, err := resolve.ParseMirrorLag(s)
	if err != nil {
		return errors.New("want error, warn or off")
	}
	*v.lag = m
	return nil
}

// minAgeFromValue binds --min-age-from onto pin.Options.MinAgeCreated.
type minAgeFromValue struct{ created *bool }

func (v minAgeFromValue) String() string {
	if *v.created {
		return "created"
	}
	return "first-seen"
}

func (minAgeFromValue) Type() string { return "string" }

func (v minAgeFromValue) Set(s string) error {
	switch s {
	case "first-seen":
		*v.created = false
	case "created":
		*v.created = true
	default:
		return errors.New("want first-seen or created")
	}
	return nil
}

// annotationValue binds --checksum-annotation onto a string: a name the
// API server accepts as an annotation key.
type annotationValue struct{ name *string }

func newAnnotationValue(name *string, def string) annotationValue {
	*name = def
	return annotationValue{name}
}

func (v annotationValue) String() string { return *v.name }
func (annotationValue) Type() string     { return "string" }

func (v annotationValue) Set(s string) error {
	if err := renderer.CheckAnnotationName(s); err != nil {
		return err
	}
	*v.name = s
	return nil
}

// platformValue binds --platform onto a *v1.Platform: nil for "", else
// one with an OS and an architecture ("linux" alone would pin whichever
// architecture an index lists first).
type platformValue struct{ p **v1.Platform }

func (v platformValue) String() string {
	if *v.p == nil {
		return ""
	}
	return (*v.p).String()
}

func (platformValue) Type() string { return "string" }

func (v platformValue) Set(s string) error {
	if s == "" {
		*v.p = nil
		return nil
	}
	p, err := v1.ParsePlatform(s)
	if err != nil {
		return err
	}
	if p.OS == "" || p.Architecture == "" {
		return errors.New("want os/arch[/variant], e.g. linux/amd64")
	}
	*v.p = p
	return nil
}

// positiveIntValue binds a count that must be at least 1.
type positiveIntValue struct{ n *int }

func newPositiveIntValue(n *int, def int) positiveIntValue {
	*n = def
	return positiveIntValue{n}
}

func (v positiveIntValue) String() string { return strconv.Itoa(*v.n) }
func (positiveIntValue) Type() string     { return "int" }

func (v positiveIntValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return errors.New("want a whole number")
	}
	if n < 1 {
		return errors.New("want at least 1")
	}
	*v.n = int(n)
	return nil
}

// positiveDurationValue binds a bound in time that must be positive;
// example says one in the error.
type positiveDurationValue struct {
	d       *time.Duration
	example string
}

func newPositiveDurationValue(d *time.Duration, def time.Duration, example string) positiveDurationValue {
	*d = def
	return positiveDurationValue{d, example}
}

func (v positiveDurationValue) String() string { return v.d.String() }
func (positiveDurationValue) Type() string     { return "duration" }

func (v positiveDurationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("want a positive duration, e.g. %s", v.example)
	}
	*v.d = d
	return nil
}

// listValue binds a repeatable flag onto a list of T, each item parsed
// at Set and appended to what the list holds (the built-in paths, for
// the path flags). With csv, one argument may hold several items
// separated by commas, as with pflag's StringSlice (and one variable
// sets a list so); without, each argument is one item, as with
// StringArray. String is "" until a Set, so that the help shows no
// default.
type listValue[T any] struct {
	list  *[]T
	parse func(string) (T, error)
	csv   bool
	given []string
}

func newListValue[T any](list *[]T, csv bool, parse func(string) (T, error)) *listValue[T] {
	return &listValue[T]{list: list, parse: parse, csv: csv}
}

func (v *listValue[T]) String() string {
	if v.given == nil {
		return ""
	}
	return "[" + strings.Join(v.given, ",") + "]"
}

func (v *listValue[T]) Type() string {
	if v.csv {
		return "stringSlice"
	}
	return "stringArray"
}

func (v *listValue[T]) Set(s string) error {
	items := []string{s}
	if v.csv {
		var err error
		if items, err = splitCSV(s); err != nil {
			return err
		}
	}
	parsed := make([]T, 0, len(items))
	for _, item := range items {
		t, err := v.parse(item)
		if err != nil {
			return err
		}
		parsed = append(parsed, t)
	}
	*v.list = append(*v.list, parsed...)
	v.given = append(v.given, items...)
	return nil
}

// splitCSV splits a comma-separated list as pflag's StringSlice does: a
// CSV record, whose items may be quoted; "" is none.
func splitCSV(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	return csv.NewReader(strings.NewReader(s)).Read()
}

// parseMirror parses FROM=TO; resolve.WithMirror checks both.
func parseMirror(s string) (resolve.Mirror, error) {
	from, to, ok := strings.Cut(s, "=")
	if !ok {
		return resolve.Mirror{}, errors.New("want FROM=TO")
	}
	return resolve.Mirror{From: from, To: to}, nil
}

// parseTagFilter checks IMAGE=REGEXP; the filter is set on the tag
// policy of IMAGE once the policies are known (options.addTagFilters).
func parseTagFilter(s string) (string, error) {
	_, expr, ok := strings.Cut(s, "=")
	if !ok {
		return "", errors.New("want IMAGE=REGEXP")
	}
	if _, err := regexp.Compile(expr); err != nil {
		return "", fmt.Errorf("parsing regular expression %q: %w", expr, err)
	}
	return s, nil
}

// policyValue binds a repeatable IMAGE=POLICY flag onto *ps, made on the
// first Set; add parses each value into it.
type policyValue[T any] struct {
	ps    **T
	add   func(ps *T, s string) error
	given []string
}

// minAgeValue binds --min-age onto a Pinner's waiting periods:
// DURATION or IMAGE-GLOB=DURATION.
func minAgeValue(m **pin.MinAges) *policyValue[pin.MinAges] {
	return &policyValue[pin.MinAges]{ps: m, add: (*pin.MinAges).Add}
}

// tagPolicyValue binds --tag-policy onto a Pinner's tag policies:
// IMAGE=STRATEGY, a later one for the same image replacing its strategy.
func tagPolicyValue(ps **tagpolicy.TagPolicies) *policyValue[tagpolicy.TagPolicies] {
	return &policyValue[tagpolicy.TagPolicies]{ps: ps, add: func(p *tagpolicy.TagPolicies, s string) error {
		return pin.AddTagEntry(s, "IMAGE=STRATEGY", p.Add)
	}}
}

// verifyValue binds --verify onto a Pinner's signature policies:
// IMAGE-GLOB=POLICY, its key files read at once.
func verifyValue(ps **verify.Policies) *policyValue[verify.Policies] {
	return &policyValue[verify.Policies]{ps: ps, add: (*verify.Policies).Add}
}

func (v *policyValue[T]) String() string {
	if v.given == nil {
		return ""
	}
	return "[" + strings.Join(v.given, ",") + "]"
}

func (v *policyValue[T]) Type() string { return "stringArray" }

func (v *policyValue[T]) Set(s string) error {
	if *v.ps == nil {
		*v.ps = new(T)
	}
	if err := v.add(*v.ps, s); err != nil {
		return err
	}
	v.given = append(v.given, s)
	return nil
}
